"""Sample-wise transducer loss (Braun, McDermott, Hsiao, arXiv 2211.16270), memory bounded.

The full (B, T, U+1, V) logits are never materialised. Samples are processed in groups (sorted in two
dimensions, U then T, each group padded only to its own max T_g x (U_g+1), sized to ``memory_budget``);
per group the joint runs on detached leaves, the fused kernels give the loss and the logits gradient at
once (written over the logits in place when nothing saved them), and the joint's backward turns it into
encoder/predictor/joint-parameter gradients before the next group's logits are allocated. A sample whose
lattice alone exceeds the budget is split over T: pass 1 keeps only the (T, U+1, 2) blank/label log-probs
(and the last chunk's logits with their graph), pass 2 backpropagates that chunk and recomputes the others.
A standard joint (``_joint.StandardJoint``) runs fused, with half the per-cell memory of its autograd graph.

Gradients are computed in forward for an upstream gradient of 1 and scaled in backward: exactly per sample
for the encoder/predictor gradients (each sample's slice depends only on that sample), and for the joint
parameters when the upstream gradient is the same for every sample ("mean", "sum", uniform "none");
otherwise the groups are recomputed in backward with the upstream folded into the logits gradient,
under the autocast state of the forward.

Host syncs per step: the lengths and targets copied to the host for validation and planning, the plan's
order uploaded once, one check of the per-sample non-finite flags after all groups, and (backward) one
check whether the upstream is uniform; none inside the group loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.autograd.function import once_differentiable

from ._joint import FusedRunner, GraphRunner, Joint, JointGroup, Needs, RngState, StepGrads, make_runner
from ._memory import (
    Group,
    Plan,
    cell_bytes,
    default_budget,
    joint_hidden_size,
    log_plan_once,
    parse_max_samples,
    parse_memory_budget,
    plan_groups,
)
from ._validation import (
    Sequences,
    check_finite,
    check_float_input,
    check_sequences,
    check_options,
    check_same_device,
    check_tdt_options,
    check_vocabulary,
)
from .batched import reduce_losses
from .lattices import TransducerLattice, accumulation_dtype, loss_lattice


@dataclass
class _Problem:
    encoder_out: torch.Tensor  # (B, T, H_e), detached
    predictor_out: torch.Tensor  # (B, U+1, H_p), detached
    runner: GraphRunner | FusedRunner
    sequences: Sequences  # in plan order
    order: torch.Tensor  # (B,) int64 on the device: the sample id at each plan position (uploaded once)
    plan: Plan
    lattice: TransducerLattice
    blank: int
    clamp: float | None
    acc_dtype: torch.dtype
    logits_dtype: torch.dtype
    # RNG state before each (group, chunk) joint call of the first gradient pass, replayed by recomputations
    # so a joint with dropout sees the same masks in every pass.
    rng_states: dict[tuple[int, int], RngState] = field(default_factory=dict)


@dataclass
class _Grads:
    encoder_out: torch.Tensor | None  # (B, T, H_e)
    predictor_out: torch.Tensor | None  # (B, U+1, H_p)
    params: list[torch.Tensor | None]  # None: no gradient (yet)
    scale: float = 1.0  # internal loss scale the buffers still carry

    def buffers(self) -> list[torch.Tensor]:
        return [t for t in (self.encoder_out, self.predictor_out, *self.params) if t is not None]

    def unscale(self) -> None:
        if self.scale != 1.0:
            for tensor in self.buffers():
                tensor.mul_(1.0 / self.scale)
            self.scale = 1.0


# float16 logits: the logits gradient formed in forward (for an upstream of 1) is multiplied by this power of
# two before the joint's float16 backward, as a GradScaler's scale would be in batched mode, so small
# gradients do not flush to zero; it is removed exactly in backward. A step whose gradients overflow is
# redone with a lower scale, which later steps keep (process-wide).
_HALF_SCALE_START = 2.0**12
_HALF_SCALE_STEP = 2.0**4
_half_scale = _HALF_SCALE_START


def _internal_scale(problem: _Problem) -> float:
    return _half_scale if problem.logits_dtype == torch.float16 else 1.0


def _lower_half_scale() -> None:
    global _half_scale
    _half_scale = max(1.0, _half_scale / _HALF_SCALE_STEP)


@dataclass(frozen=True)
class _AutocastState:
    device_type: str
    enabled: bool
    dtype: torch.dtype

    @classmethod
    def capture(cls, device_type: str) -> _AutocastState:
        return cls(device_type, torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type))

    def restore(self) -> torch.autocast:
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled)


def _group_index(problem: _Problem, group: Group) -> torch.Tensor | None:
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


def _accumulate(grads: _Grads, group: Group, index: torch.Tensor | None, t0: int, step: StepGrads) -> None:
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


def _joint_step(problem: _Problem, joint: JointGroup, key: tuple[int, int], t1: int, keep: bool, record: bool):
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
    problem: _Problem,
    position: int,
    group: Group,
    scale: torch.Tensor | None,
    needs: Needs,
    grads: _Grads | None,
    bad: torch.Tensor,
) -> torch.Tensor:
    """Loss (n,) of one group; flags its non-finite samples in `bad` (B,) (plan order); with `scale` (B,)
    (plan order), also accumulates the scale-weighted gradients into `grads`. No host sync."""
    stop = group.start + len(group.samples)
    sequences = problem.sequences.rows(group.start, stop)
    index = _group_index(problem, group)
    encoder = _group_rows(problem.encoder_out, group, index, group.frames)
    predictor = _group_rows(problem.predictor_out, group, index, group.labels_plus_one)
    chunks = group.chunks()
    gradient = scale is not None
    joint = problem.runner.begin(encoder, predictor, needs if gradient else Needs())

    # Pass 1: every chunk's log-probs; the last chunk's logits keep their graph (gradient pass) and are
    # backpropagated first, so a group that fits is never recomputed and a chunked one saves one chunk.
    pieces, kept = [], None
    for t0, t1 in chunks:
        last = gradient and t1 == group.frames
        step = _joint_step(problem, joint, (position, t0), t1, keep=last, record=gradient)
        pieces.append(problem.lattice.log_probs(step.logits, sequences, problem.blank, bad[group.start : stop], t0))
        kept = step if last else None
        del step
    log_probs = torch.cat([piece[0] for piece in pieces], 1) if len(pieces) > 1 else pieces[0][0]
    denominators = torch.cat([piece[1] for piece in pieces], 1) if len(pieces) > 1 else pieces[0][1]
    del pieces
    stats = problem.lattice.recursions(log_probs, denominators, sequences)
    if not gradient:
        return stats.nll
    group_scale = scale[group.start : stop]
    for t0, t1 in chunks[-1:] + chunks[:-1]:
        if kept is None:
            step = _joint_step(problem, joint, (position, t0), t1, keep=True, record=False)
        else:
            step, kept = kept, None
        grad = problem.lattice.logits_grad(
            step.logits, stats, sequences, problem.blank, group_scale, problem.clamp, problem.runner.inplace, t0
        )
        step_grads = step.backprop(grad)
        del step, grad
        _accumulate(grads, group, index, t0, step_grads)
        del step_grads  # not alive during the next step's backprop
    _accumulate(grads, group, index, 0, joint.finish())
    return stats.nll


def _run(problem: _Problem, scale: torch.Tensor | None, needs: Needs) -> tuple[torch.Tensor, _Grads | None]:
    """Per-sample losses (B,) and, with `scale` (B,) in plan order, the scale-weighted gradients of every
    group. Non-finite logits are reported once, after all groups: the step's only device sync."""
    encoder_out, predictor_out = problem.encoder_out, problem.predictor_out
    grads = None
    internal = _internal_scale(problem) if scale is not None else 1.0
    if scale is not None:
        grads = _Grads(
            torch.zeros_like(encoder_out) if needs.encoder_out else None,
            torch.zeros_like(predictor_out) if needs.predictor_out else None,
            [None] * len(problem.runner.params),  # filled by the first step that reaches each parameter
            internal,
        )
        scale = scale * internal if internal != 1.0 else scale
    bad = torch.zeros(encoder_out.shape[0], dtype=torch.bool, device=encoder_out.device)  # plan order
    losses = problem.runner.with_leaves(
        lambda: [
            _run_group(problem, position, group, scale, needs, grads, bad)
            for position, group in enumerate(problem.plan.groups)
        ]
    )
    if internal != 1.0:
        # One sync for both checks: non-finite logits, and gradients overflowed by the internal scale.
        finite = torch.stack([torch.isfinite(tensor).all() for tensor in grads.buffers()]).all()
        any_bad, overflow = torch.stack([bad.any(), ~finite]).tolist()
        if overflow and not any_bad:
            _lower_half_scale()
            return _run(problem, scale / internal, needs)
    check_finite(bad, problem.plan.order)
    in_plan_order = torch.cat(losses) if len(losses) > 1 else losses[0]
    nll = torch.empty_like(in_plan_order).index_copy_(0, problem.order, in_plan_order)
    return nll, grads


class _SamplewiseTransducerLoss(torch.autograd.Function):
    """(encoder_out, predictor_out, *joint params) -> per-sample nll (B,)."""

    @staticmethod
    def forward(ctx, problem: _Problem, encoder_out: torch.Tensor, predictor_out: torch.Tensor, *params: torch.Tensor):
        needs = Needs(ctx.needs_input_grad[1], ctx.needs_input_grad[2], any(ctx.needs_input_grad[3:]))
        ones = torch.ones(encoder_out.shape[0], dtype=problem.acc_dtype, device=encoder_out.device)
        nll, grads = _run(problem, ones, needs)
        ctx.problem, ctx.grads, ctx.needs = problem, grads, needs
        ctx.autocast = _AutocastState.capture(encoder_out.device.type)
        return nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: torch.Tensor):
        grads: _Grads | None = ctx.grads
        ctx.grads = None  # scaled in place below; a second backward (retain_graph=True) recomputes everything
        if grads is None:
            grads = _recompute(ctx, grad_nll, ctx.needs)
        else:
            upstream = grad_nll / grads.scale  # removes the internal scale in the same multiplication
            per_sample = upstream.view(-1, 1, 1)
            for tensor in (grads.encoder_out, grads.predictor_out):
                if tensor is not None:
                    tensor.mul_(per_sample.to(tensor.dtype))
            if ctx.needs.params and bool((grad_nll != grad_nll[0]).any()):
                # Non-uniform upstream ("none" with arbitrary weights): parameter gradients mix samples.
                grads.params = _recompute(ctx, grad_nll, Needs(params=True)).params
            else:
                for tensor in grads.params:
                    if tensor is not None:
                        tensor.mul_(upstream[0].to(tensor.dtype))
        return (None, grads.encoder_out, grads.predictor_out, *grads.params)


def _recompute(ctx, grad_nll: torch.Tensor, needs: Needs) -> _Grads:
    """Gradients for upstream `grad_nll` (B,), group by group, under the forward's autocast state."""
    problem: _Problem = ctx.problem
    scale = grad_nll.to(problem.acc_dtype).index_select(0, problem.order)  # plan order
    with ctx.autocast.restore():
        grads = _run(problem, scale, needs)[1]
    grads.unscale()
    return grads


def _probe_joint(joint: Joint, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
    """Joint output for one lattice cell: gives V and the logits dtype (autocast aware) before planning."""
    with torch.no_grad():
        logits = joint(encoder_out[:1, :1], predictor_out[:1, :1])
    if not isinstance(logits, torch.Tensor) or logits.dim() != 4 or tuple(logits.shape[:3]) != (1, 1, 1):
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"joint must return logits of shape (N, T, U+1, V) = (1, 1, 1, 'V'), got {shape}")
    return logits


def _bytes_per_cell(
    runner: GraphRunner | FusedRunner,
    joint: Joint,
    probe: torch.Tensor,
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    values_per_cell: int,
) -> int:
    width = probe.shape[-1]
    if isinstance(runner, FusedRunner):
        hidden, copies, mask = joint.output.in_features, runner.hidden_copies, runner.mask_bytes
        return cell_bytes(width, probe.dtype, hidden, probe.dtype, copies, mask, values_per_cell)
    hidden = joint_hidden_size(joint, encoder_out.shape[-1], predictor_out.shape[-1])
    return cell_bytes(width, probe.dtype, hidden, encoder_out.dtype, runner.hidden_copies, 0, values_per_cell)


@torch.compiler.disable
def samplewise_transducer_loss(
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    joint: Joint,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: str = "mean",
    clamp: float | None = None,
    memory_budget: int | str | None = None,
    max_samples_per_group: int | None = None,
    durations: list[int] | tuple[int, ...] | None = None,
    sigma: float = 0.0,
    omega: float = 0.0,
) -> torch.Tensor:
    """Transducer loss (RNN-T, or TDT with `durations`) computed sample-group by sample-group; same values and
    gradients as ``transducer_loss(joint(encoder_out, predictor_out), ...)`` with bounded transient memory.

    Args:
        encoder_out: (B, T, H_e) encoder output.
        predictor_out: (B, U+1, H_p) prediction-network output.
        joint: maps (N, T, H_e), (N, U+1, H_p) to (N, T, U+1, V) logits (TDT: V + D, the duration scores
            last), independently per sample (no batch
            statistics). A joint satisfying ``StandardJoint`` (e.g. ``asr_plugin.models.Joint`` without
            active dropout) is run fused. Recomputations (T-chunks, non-uniform "none" upstream) replay the
            RNG state, so dropout masks match between passes. Gradients reach every parameter of an
            ``nn.Module`` joint; tensors captured by a plain callable get none.
        targets, logit_lengths, target_lengths, blank, reduction, clamp, durations, sigma, omega: as in
            ``transducer_loss``.
        memory_budget: bytes (int) or a string like "512MiB"/"2GB" bounding the transient memory of one step;
            None: 1 GiB on CUDA, 256 MiB on CPU (fixed, so every step and DDP rank plans alike).
        max_samples_per_group: at most this many samples per step (None: as many as fit the budget).
    """
    check_options(blank, reduction, clamp)
    durations = check_tdt_options(durations, sigma, omega)
    budget = parse_memory_budget(memory_budget)
    max_samples = parse_max_samples(max_samples_per_group)
    check_float_input("encoder_out", encoder_out, 3, "(B, T, H_e)")
    check_float_input("predictor_out", predictor_out, 3, "(B, U+1, H_p)")
    if predictor_out.shape[0] != encoder_out.shape[0]:
        raise ValueError(
            f"predictor_out has batch size {predictor_out.shape[0]} but encoder_out has B = {encoder_out.shape[0]}"
        )
    device = encoder_out.device
    check_same_device(device, "encoder_out", predictor_out=predictor_out)
    sequences = check_sequences(
        targets,
        logit_lengths,
        target_lengths,
        batch=encoder_out.shape[0],
        frames=encoder_out.shape[1],
        labels_plus_one=predictor_out.shape[1],
        device=device,
        source="encoder_out",
        labels_source="predictor_out",
    )
    runner = make_runner(joint)
    probe = _probe_joint(joint, encoder_out, predictor_out)
    check_vocabulary(sequences, probe.shape[-1], blank, len(durations or ()))
    lattice = loss_lattice(durations, sigma, omega)
    # the TDT lattice's statistics, also when this call fell back to RNN-T: the plan does not depend on the draw
    values_per_cell = loss_lattice(durations, sigma, 0.0).values_per_cell()
    plan = plan_groups(
        sequences.frames,
        sequences.labels,
        budget or default_budget(device),
        _bytes_per_cell(runner, joint, probe, encoder_out, predictor_out, values_per_cell),
        max_samples,
    )
    fixed = 2 * (encoder_out.nbytes + predictor_out.nbytes) + 2 * sum(p.nbytes for p in runner.params)
    log_plan_once(plan, fixed)
    order = torch.tensor(plan.order, dtype=torch.int64, device=device)  # the step's one host-to-device copy
    problem = _Problem(
        encoder_out=encoder_out.detach(),
        predictor_out=predictor_out.detach(),
        runner=runner,
        sequences=sequences.permuted(order, plan.order),
        order=order,
        plan=plan,
        lattice=lattice,
        blank=blank,
        clamp=clamp,
        acc_dtype=accumulation_dtype(probe.dtype),
        logits_dtype=probe.dtype,
    )
    if torch.is_grad_enabled() and (encoder_out.requires_grad or predictor_out.requires_grad or runner.params):
        nll = _SamplewiseTransducerLoss.apply(problem, encoder_out, predictor_out, *runner.params)
    else:
        nll, _ = _run(problem, None, Needs())
    return reduce_losses(nll, reduction)
