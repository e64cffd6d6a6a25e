"""The sample-wise loss's group loop: one loop over the plan's groups for every lattice (``lattices``) and joint
runner (``runners``).

Per group: the joint runs on the group's rows (detached leaves), the lattice's fused log-softmax keeps only the
per-cell values its recursions need, the recursions give the group's losses, and (in a gradient pass) the
lattice's logits gradient, weighted per sample, goes back through the runner into encoder, predictor and joint
parameter gradients before the next group's logits exist. T-chunked groups (``planning.Group.chunks``) run
pass 1 chunk by chunk keeping the last chunk's logits, then backpropagate it and recompute the others. The flash
runner (``flash.FlashRunner``, never chunked) has no logits: its group forms the log-probs and, from the
recursions' statistics, every gradient itself (``_run_flash_group``).

Host syncs: none inside the loop; one check of the per-sample non-finite flags after all groups (shared, for
float16 logits, with the overflow check of the fp16 gradient scale).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ._validation import Sequences, check_finite
from .lattices import TransducerLattice
from .planning import Group, Plan
from .runners import FusedRunner, GraphRunner, JointGroup, Needs, RngState, StepGrads

# float16 logits: the logits gradient formed in forward (for an upstream of 1) is multiplied by a power of two,
# the fp16 gradient scale, before the joint's float16 backward, as a GradScaler's loss scale would be in batched
# mode, so small gradients do not flush to zero; it is removed exactly in backward. A pass whose gradients
# overflow is redone with the scale divided by FP16_SCALE_STEP, which the loss's state keeps for later calls.
FP16_SCALE_START = 2.0**12
FP16_SCALE_STEP = 2.0**4


@dataclass
class SamplewiseState:
    """What a sample-wise loss carries from one call to the next: owned by a ``TransducerLoss`` (so each loss
    object adapts on its own), fresh for every call of the functional ``samplewise_transducer_loss``."""

    fp16_scale: float = FP16_SCALE_START
    last_plan: Plan | None = None


@dataclass
class Problem:
    encoder_out: torch.Tensor  # (B, T, H_e), detached
    predictor_out: torch.Tensor  # (B, U+1, H_p), detached
    runner: GraphRunner | FusedRunner
    sequences: Sequences  # in plan order
    order: torch.Tensor  # (B,) int64 on the device: the sample id at each plan position (uploaded once)
    plan: Plan
    lattice: TransducerLattice
    blank: int
    acc_dtype: torch.dtype
    logits_dtype: torch.dtype
    state: SamplewiseState
    # RNG state before each (group, chunk) joint call of the first gradient pass, replayed by recomputations
    # so a joint with dropout sees the same masks in every pass.
    rng_states: dict[tuple[int, int], RngState] = field(default_factory=dict)


@dataclass
class Grads:
    encoder_out: torch.Tensor | None  # (B, T, H_e)
    predictor_out: torch.Tensor | None  # (B, U+1, H_p)
    params: list[torch.Tensor | None]  # None: no gradient (yet)
    fp16_scale: float = 1.0  # the fp16 gradient scale the buffers still carry

    def buffers(self) -> list[torch.Tensor]:
        return [t for t in (self.encoder_out, self.predictor_out, *self.params) if t is not None]

    def remove_fp16_scale(self) -> None:
        if self.fp16_scale != 1.0:
            for tensor in self.buffers():
                tensor.mul_(1.0 / self.fp16_scale)
            self.fp16_scale = 1.0


def _group_index(problem: Problem, group: Group) -> torch.Tensor | None:
    """(n,) sample ids of a group on the device, a slice of the order uploaded once (no host sync); None for a
    one-sample group, whose rows are plain views."""
    if len(group.samples) == 1:
        return None
    return problem.order[group.start : group.start + len(group.samples)]


def _group_rows(tensor: torch.Tensor, group: Group, index: torch.Tensor | None, length: int) -> torch.Tensor:
    """(n, length, H) rows of the group's samples (`index`: `_group_index`); a view for one sample."""
    rows = tensor.narrow(1, 0, length) if length < tensor.shape[1] else tensor
    return rows.narrow(0, group.samples[0], 1) if index is None else rows.index_select(0, index)


def _add_rows(buffer: torch.Tensor, group: Group, index: torch.Tensor | None, t0: int, grad: torch.Tensor) -> None:
    """buffer[group's samples, t0 : t0 + grad.shape[1]] += grad (n, ., H); a plain view for one sample."""
    rows = buffer.narrow(1, t0, grad.shape[1]) if grad.shape[1] < buffer.shape[1] else buffer
    if index is None:
        rows.narrow(0, group.samples[0], 1).add_(grad)
    else:
        rows.index_add_(0, index, grad)


def _accumulate(grads: Grads, group: Group, index: torch.Tensor | None, t0: int, step: StepGrads) -> None:
    """Add a step's (t0: its first frame) or a finished group's (t0 = 0) gradients into the step's buffers."""
    if step.encoder_out is not None:
        _add_rows(grads.encoder_out, group, index, t0, step.encoder_out)
    if step.predictor_out is not None:
        _add_rows(grads.predictor_out, group, index, 0, step.predictor_out)
    for slot, param_grad in enumerate(step.params):
        if param_grad is None:
            continue
        if grads.params[slot] is None:
            grads.params[slot] = param_grad  # a fresh tensor: the first contribution is the buffer
        else:
            grads.params[slot].add_(param_grad)


def _joint_step(problem: Problem, joint: JointGroup, key: tuple[int, int], t1: int, keep: bool, record: bool):
    """Logits of frames [key[1], t1) of the group at position key[0]; `record` stores the RNG state of a
    gradient pass for later replays."""
    t0 = key[1]
    if not problem.runner.records_rng:
        return joint.step(t0, t1, keep)
    state = problem.rng_states.get(key)
    if state is None:
        if record:
            problem.rng_states[key] = RngState.capture(problem.encoder_out.device)
        return joint.step(t0, t1, keep)
    with state.replay():
        return joint.step(t0, t1, keep)


def _run_group(
    problem: Problem,
    position: int,
    group: Group,
    weights: torch.Tensor | None,
    needs: Needs,
    grads: Grads | None,
    bad: torch.Tensor,
) -> torch.Tensor:
    """Loss (n,) of one group; flags its non-finite samples in `bad` (B,) (plan order); with `weights` (B,)
    (plan order: each sample's upstream gradient), also accumulates the weighted gradients into `grads`. No
    host sync."""
    stop = group.start + len(group.samples)
    sequences = problem.sequences.rows(group.start, stop)
    index = _group_index(problem, group)
    encoder = _group_rows(problem.encoder_out, group, index, group.frames)
    predictor = _group_rows(problem.predictor_out, group, index, group.labels_plus_one)
    chunks = group.chunks()
    gradient = weights is not None
    joint = problem.runner.begin(encoder, predictor, needs if gradient else Needs())
    if problem.runner.flash:
        return _run_flash_group(problem, group, joint, sequences, weights, grads, bad, index)

    # Pass 1: every chunk's log-probs, written into the whole group's (no second copy of them); the last chunk's
    # logits keep their graph (gradient pass) and are backpropagated first, so a group that fits is never
    # recomputed and a chunked one saves one chunk.
    whole, kept = None, None
    for t0, t1 in chunks:
        last = gradient and t1 == group.frames
        step = _joint_step(problem, joint, (position, t0), t1, keep=last, record=gradient)
        piece = problem.lattice.log_probs(step.logits, sequences, problem.blank, bad[group.start : stop], t0)
        if len(chunks) == 1:
            whole = piece
        else:
            if whole is None:  # (n, T_g, U_g+1[, values]) log-probs and denominators
                whole = [part.new_empty(part.shape[:1] + (group.frames,) + part.shape[2:]) for part in piece]
            for target, part in zip(whole, piece):
                target.narrow(1, t0, t1 - t0).copy_(part)
        kept = step if last else None
        del step, piece
    stats = problem.lattice.recursions(*whole, sequences)
    del whole
    if not gradient:
        return problem.lattice.loss_values(stats.nll)
    group_weights = weights[group.start : stop]
    for t0, t1 in chunks[-1:] + chunks[:-1]:
        if kept is None:
            step = _joint_step(problem, joint, (position, t0), t1, keep=True, record=False)
        else:
            step, kept = kept, None
        grad = problem.lattice.logits_grad(
            step.logits, stats, sequences, problem.blank, group_weights, problem.runner.inplace, t0
        )
        step_grads = step.backprop(grad)
        del step, grad
        _accumulate(grads, group, index, t0, step_grads)
        del step_grads  # not alive during the next step's backprop
    _accumulate(grads, group, index, 0, joint.finish())
    return problem.lattice.loss_values(stats.nll)


def _run_flash_group(problem, group: Group, joint, sequences, weights, grads, bad, index) -> torch.Tensor:
    """``_run_group`` for the flash runner: the whole group at once (its plan has no T-chunks), no logits."""
    if group.chunk != group.frames:
        raise RuntimeError(f"the flash joint runs whole groups, but the plan chunks this one: {group}")
    stop = group.start + len(group.samples)
    log_probs, denominators = joint.log_probs(sequences, problem.blank, bad[group.start : stop])
    stats = problem.lattice.recursions(log_probs, denominators, sequences)
    if weights is not None:
        weighted = weights[group.start : stop]
        _accumulate(
            grads,
            group,
            index,
            0,
            joint.backprop_lattice(stats, sequences, problem.blank, weighted, problem.lattice.clamp),
        )
        _accumulate(grads, group, index, 0, joint.finish())
    return problem.lattice.loss_values(stats.nll)


def run(problem: Problem, weights: torch.Tensor | None, needs: Needs) -> tuple[torch.Tensor, Grads | None]:
    """Per-sample losses (B,) and, with `weights` (B,) in plan order, the weighted gradients of every group
    (still carrying ``Grads.fp16_scale``). Non-finite logits are reported once, after all groups: the pass's
    only device sync."""
    encoder_out, predictor_out = problem.encoder_out, problem.predictor_out
    grads = None
    fp16_scale = problem.state.fp16_scale if weights is not None and problem.logits_dtype == torch.float16 else 1.0
    if weights is not None:
        grads = Grads(
            torch.zeros_like(encoder_out) if needs.encoder_out else None,
            torch.zeros_like(predictor_out) if needs.predictor_out else None,
            [None] * len(problem.runner.params),  # filled by the first step that reaches each parameter
            fp16_scale,
        )
    scaled = weights * fp16_scale if weights is not None and fp16_scale != 1.0 else weights
    bad = torch.zeros(encoder_out.shape[0], dtype=torch.bool, device=encoder_out.device)  # plan order
    losses = problem.runner.with_leaves(
        lambda: [
            _run_group(problem, position, group, scaled, needs, grads, bad)
            for position, group in enumerate(problem.plan.groups)
        ]
    )
    if fp16_scale != 1.0:
        # One sync for both checks: non-finite logits, and gradients overflowed by the fp16 gradient scale.
        finite = torch.stack([torch.isfinite(tensor).all() for tensor in grads.buffers()]).all()
        any_bad, overflow = torch.stack([bad.any(), ~finite]).tolist()
        if overflow and not any_bad:
            problem.state.fp16_scale = max(1.0, fp16_scale / FP16_SCALE_STEP)
            return run(problem, weights, needs)
    check_finite(bad, problem.plan.order)
    in_plan_order = torch.cat(losses) if len(losses) > 1 else losses[0]
    nll = torch.empty_like(in_plan_order).index_copy_(0, problem.order, in_plan_order)
    return nll, grads
