"""Sample-wise transducer loss (Braun, McDermott, Hsiao, arXiv 2211.16270), memory bounded.

The full (B, T, U+1, V) logits (TDT: V + D) are never materialised. Samples are processed in groups (sorted in two
dimensions, U then T, each group padded only to its own max T_g x (U_g+1), sized to ``memory_budget``);
per group the joint runs on detached leaves, the fused kernels give the loss and the logits gradient at
once (written over the logits in place when nothing saved them), and the joint's backward turns it into
encoder/predictor/joint-parameter gradients before the next group's logits are allocated. A sample whose
lattice alone exceeds the budget is split over T: pass 1 keeps only the lattice's per-cell log-probs (RNN-T:
(T, U+1, 2) blank/label) and the last chunk's logits with their graph, pass 2 backpropagates that chunk and
recomputes the others.
A standard joint (``runners.StandardJoint``) runs fused, with half the per-cell memory of its autograd graph,
or, where the flash joint can run it (``flash_joint``, ``runner_choice.choose_flash``: on CUDA by default), by
the flash kernels, with no logits at all (``planning.flash_cell_bytes``: per cell 24 bytes, whatever V).
The options (``options.SamplewiseOptions``) are one value, checked when built: ``TransducerLoss`` builds it
once, the functional entries below for their callers; ``samplewise_loss`` and ``samplewise_plan`` take it.
The group loop itself is ``engine.run``; it computes over the RNN-T or the TDT lattice (``lattices``) alike.

Gradients are computed in forward for an upstream gradient of 1 and weighted by it in backward: exactly per sample
for the encoder/predictor gradients (each sample's slice depends only on that sample), and for the joint
parameters when the upstream gradient is the same for every sample ("mean", "sum", uniform "none");
otherwise the groups are recomputed in backward with the upstream folded into the logits gradient,
under the autocast state of the forward.

Host syncs per step: the lengths and targets copied to the host for validation and planning, the plan's
order uploaded once, one check of the per-sample non-finite flags after all groups, and (backward) one
check whether the upstream is uniform; none inside the group loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ._validation import Sequences, check_joint_inputs, check_vocabulary
from .batched import reduce_losses
from .engine import Grads, Problem, SamplewiseState, run
from .lattices import TransducerLattice, accumulation_dtype
from .options import SamplewiseOptions
from .planning import CellBytes, Plan, cell_bytes, default_budget, flash_cell_bytes, plan_groups
from .runner_choice import choose_flash, make_runner
from .runners import FusedRunner, GraphRunner, Joint, Needs, check_extra_outputs, check_joint, joint_hidden_size


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


class _SamplewiseTransducerLoss(torch.autograd.Function):
    """(encoder_out, predictor_out, *joint params) -> per-sample nll (B,)."""

    @staticmethod
    def forward(ctx, problem: Problem, encoder_out: torch.Tensor, predictor_out: torch.Tensor, *params: torch.Tensor):
        needs = Needs(ctx.needs_input_grad[1], ctx.needs_input_grad[2], any(ctx.needs_input_grad[3:]))
        ones = torch.ones(encoder_out.shape[0], dtype=problem.acc_dtype, device=encoder_out.device)
        nll, grads = run(problem, ones, needs)
        ctx.problem, ctx.grads, ctx.needs = problem, grads, needs
        ctx.autocast = _AutocastState.capture(encoder_out.device.type)
        return nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: torch.Tensor):
        grads: Grads | None = ctx.grads
        ctx.grads = None  # weighted in place below; a second backward (retain_graph=True) recomputes everything
        if grads is None:
            grads = _recompute(ctx, grad_nll, ctx.needs)
        else:
            upstream = grad_nll / grads.fp16_scale  # removes the fp16 gradient scale in the same multiplication
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


def _recompute(ctx, grad_nll: torch.Tensor, needs: Needs) -> Grads:
    """Gradients for upstream `grad_nll` (B,), group by group, under the forward's autocast state."""
    problem: Problem = ctx.problem
    weights = grad_nll.to(problem.acc_dtype).index_select(0, problem.order)  # plan order
    with ctx.autocast.restore():
        grads = run(problem, weights, needs)[1]
    grads.remove_fp16_scale()
    return grads


def _probe_joint(joint: Joint, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
    """Joint output for one lattice cell: gives V (+ D) and the logits dtype (autocast aware) before planning."""
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
) -> CellBytes:
    width = probe.shape[-1]
    hidden = joint_hidden_size(joint, encoder_out.shape[-1], predictor_out.shape[-1])
    if runner.flash:  # the projections come in the joint's output dtype (autocast casts every Linear alike)
        input_width = max(encoder_out.shape[-1], predictor_out.shape[-1])
        return flash_cell_bytes(hidden, probe.dtype, input_width, encoder_out.dtype, values_per_cell)
    if isinstance(runner, FusedRunner):
        return cell_bytes(
            width, probe.dtype, hidden, probe.dtype, runner.hidden_copies, runner.mask_bytes, values_per_cell
        )
    return cell_bytes(width, probe.dtype, hidden, encoder_out.dtype, runner.hidden_copies, 0, values_per_cell)


@dataclass(frozen=True)
class _Setup:
    """A checked sample-wise call, planned: everything but the RNG draw of omega and the run itself."""

    sequences: Sequences
    runner: GraphRunner | FusedRunner
    probe: torch.Tensor  # (1, 1, 1, W) the joint's output for one cell
    plan: Plan


def _set_up(
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    joint: Joint,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    options: SamplewiseOptions,
) -> _Setup:
    sequences = check_joint_inputs(encoder_out, predictor_out, targets, logit_lengths, target_lengths)
    device, lattice = encoder_out.device, options.lattice
    check_joint(joint)  # before the probe calls it
    check_extra_outputs(joint, lattice)
    probe = _probe_joint(joint, encoder_out, predictor_out)
    check_vocabulary(sequences, probe.shape[-1], options.blank, lattice.num_extra_outputs)
    runner = make_runner(joint, choose_flash(joint, options, device, probe.dtype))
    # the configured lattice's statistics, also for a call that omega turns into RNN-T: the plan does not depend on
    # the draw
    values_per_cell = lattice.values_per_cell()
    fixed = 2 * (encoder_out.nbytes + predictor_out.nbytes) + 2 * sum(p.nbytes for p in runner.params)
    if runner.flash:  # each group's float32 buffers for the output layer's gradients (V, H) and (V,)
        fixed += 4 * (runner.output_weight.numel() + runner.output_weight.shape[0])
    plan = plan_groups(
        sequences.frames,
        sequences.labels,
        options.memory_budget or default_budget(device),
        _bytes_per_cell(runner, joint, probe, encoder_out, predictor_out, values_per_cell),
        options.max_samples_per_group,
        fixed,
        runner.name,
    )
    return _Setup(sequences, runner, probe, plan)


def samplewise_plan(
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    joint: Joint,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    options: SamplewiseOptions,
) -> Plan:
    """The plan ``samplewise_loss`` would run with these inputs and `options` (groups, T-chunks, the estimated
    bytes, ``Plan.runner``: how the joint runs), after the same checks; computes nothing but the joint on one
    lattice cell."""
    return _set_up(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, options).plan


def plan_samplewise(
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    joint: Joint,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    lattice: TransducerLattice | Mapping[str, Any] | None = None,
    **options: Any,
) -> Plan:
    """``samplewise_plan`` for the options of a ``samplewise_transducer_loss`` call (`lattice` and the keyword
    `options` of ``SamplewiseOptions``: blank, memory_budget, max_samples_per_group, flash_joint, backend)."""
    checked = SamplewiseOptions(lattice=lattice, **options)
    return samplewise_plan(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, checked)


@torch.compiler.disable
def samplewise_loss(
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    joint: Joint,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    options: SamplewiseOptions,
    state: SamplewiseState | None = None,
) -> torch.Tensor:
    """Transducer loss over `options.lattice` (RNN-T, or TDT) computed sample-group by sample-group; same values
    and gradients as ``transducer_loss(joint(encoder_out, predictor_out), ...)`` with bounded transient memory.

    Args:
        encoder_out: (B, T, H_e) encoder output.
        predictor_out: (B, U+1, H_p) prediction-network output.
        joint: maps (N, T, H_e), (N, U+1, H_p) to (N, T, U+1, V) logits (TDT: V + D, the duration scores
            last), independently per sample (no batch statistics). A joint satisfying ``StandardJoint`` (e.g.
            ``asr_plugin.models.Joint``) is run fused. Recomputations (T-chunks, non-uniform "none" upstream)
            replay the RNG state, so dropout masks match between passes. Gradients reach every parameter of an
            ``nn.Module`` joint; tensors captured by a plain callable get none.
        targets, logit_lengths, target_lengths: as in ``transducer_loss``.
        options: the lattice, blank, reduction, omega, kernels, memory budget, group size and flash joint
            (``SamplewiseOptions``, checked when built). The flash joint (``losses.flash``: no logits tensor; per
            lattice cell 24 bytes whatever V, so far larger groups fit a budget) runs under "auto" on CUDA
            tensors when it can (``runner_choice.flash_unavailable``: tanh/relu, no active joint dropout, RNN-T
            without FastEmit, not float64, backend "auto" or "triton"), else the fused or graph runner, and never
            on the CPU. ``last_plan.runner`` says which ran.
        state: what the loss carries across calls (``engine.SamplewiseState``: the fp16 gradient scale, lowered
            after an overflow, and this call's plan, left in ``state.last_plan``); ``TransducerLoss`` passes its
            own. None: a fresh one (the fp16 gradient scale starts at 2^12 on every call).
    """
    state = SamplewiseState() if state is None else state
    setup = _set_up(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, options)
    plan, runner = setup.plan, setup.runner
    state.last_plan = plan
    order = torch.tensor(plan.order, dtype=torch.int64, device=encoder_out.device)  # the step's one host-to-device copy
    problem = Problem(
        encoder_out=encoder_out.detach(),
        predictor_out=predictor_out.detach(),
        runner=runner,
        sequences=setup.sequences.permuted(order, plan.order),
        order=order,
        plan=plan,
        lattice=options.lattice.for_call(options.omega).on_backend(options.backend),
        blank=options.blank,
        acc_dtype=accumulation_dtype(setup.probe.dtype),
        logits_dtype=setup.probe.dtype,
        state=state,
    )
    if torch.is_grad_enabled() and (encoder_out.requires_grad or predictor_out.requires_grad or runner.params):
        nll = _SamplewiseTransducerLoss.apply(problem, encoder_out, predictor_out, *runner.params)
    else:
        nll, _ = run(problem, None, Needs())
    return reduce_losses(nll, options.reduction)


@torch.compiler.disable
def samplewise_transducer_loss(
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    joint: Joint,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    lattice: TransducerLattice | Mapping[str, Any] | None = None,
    state: SamplewiseState | None = None,
    **options: Any,
) -> torch.Tensor:
    """``samplewise_loss`` for direct callers: `lattice` and the keyword `options` are ``SamplewiseOptions``'s
    (blank, reduction, omega, memory_budget, max_samples_per_group, backend, flash_joint), checked here, e.g.
    ``samplewise_transducer_loss(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths,
    TDT([0, 1, 2, 3, 4], sigma=0.02), memory_budget="512MiB")``; `state` as in ``samplewise_loss``."""
    checked = SamplewiseOptions(lattice=lattice, **options)
    return samplewise_loss(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, checked, state)
