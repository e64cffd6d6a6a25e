"""The flash joint: the RNN-T loss of a standard joint (``runners.StandardJoint``:
``output(act(project_encoder(enc) + project_predictor(pred)))``) computed by the ``flash_joint`` kernels
(``triton.flash``), so no (B, T, U+1, V) tensor exists in forward or backward: per lattice cell only the two
log-probs, the denominator, alpha and beta (float32) are kept, as ``RNNT.values_per_cell``.

* ``flash_transducer_loss(encoder_out, predictor_out, joint, ...)``: the loss on its own. The projections run
  through autograd (their own parameters and the inputs get gradients as usual); the activation, the output
  layer and the loss are one autograd Function whose backward recomputes the logits tile by tile.
* ``FlashRunner``: the same computation as the sample-wise loss's per-group runner, beside the graph and fused
  runners (``runners``; chosen by the ``flash_joint`` option, ``runner_choice``): per group the projections,
  ``flash_log_probs``, the recursions, ``flash_grads``.

Both decline, by name (``runners.flash_declines``), what they do not implement: joint dropout (no mask to
replay), activations other than tanh and relu, TDT joints (extra outputs), FastEmit. They need the Triton
backend's device: CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``. This module imports Triton: it is
imported only when the flash joint runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ._validation import Sequences, check_finite, check_joint_inputs, check_vocabulary
from .backends import resolve_backend
from .batched import reduce_losses
from .lattices import RNNT, LatticeStats
from .options import LossOptions
from .runners import FusedGroup, FusedRunner, Needs, StandardJoint, StepGrads, flash_declines
from .triton import ops
from .triton.flash import flash_grads, flash_log_probs


def _zeros(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Zeroed float32 buffers shaped as `tensors`: the flash gradient kernel's atomic adds' targets."""
    return tuple(torch.zeros(tensor.shape, dtype=torch.float32, device=tensor.device) for tensor in tensors)


def _grad_buffers(enc_proj, pred_proj, weight) -> tuple[torch.Tensor, ...]:
    """Zeroed float32 buffers for d (enc_proj, pred_proj, W_out, b)."""
    return _zeros(enc_proj, pred_proj, weight, weight[:, 0])


class _FlashRNNTLoss(torch.autograd.Function):
    """(enc_proj (N, T, H), pred_proj (N, U+1, H), W_out (V, H), b (V,) or None) -> nll (N,)."""

    @staticmethod
    def forward(ctx, enc_proj, pred_proj, weight, bias, sequences, blank: int, activation: str, clamp):
        bad = torch.zeros(enc_proj.shape[0], dtype=torch.bool, device=enc_proj.device)
        log_probs, denominators = flash_log_probs(enc_proj, pred_proj, weight, bias, sequences, blank, activation, bad)
        check_finite(bad)
        alphas, betas, nll = ops.transducer_alphas_betas(log_probs, *sequences.tensors()[1:])
        ctx.save_for_backward(enc_proj, pred_proj, weight, bias, log_probs, denominators, alphas, betas, nll)
        ctx.sequences, ctx.blank, ctx.activation, ctx.clamp = sequences, blank, activation, clamp
        return nll.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll):
        enc_proj, pred_proj, weight, bias, log_probs, denominators, alphas, betas, nll = ctx.saved_tensors
        stats = LatticeStats(log_probs, denominators, alphas, betas, nll)
        grads = _grad_buffers(enc_proj, pred_proj, weight)
        upstream = grad_nll.float().contiguous()
        flash_grads(
            enc_proj,
            pred_proj,
            weight,
            bias,
            ctx.sequences,
            stats,
            upstream,
            ctx.blank,
            ctx.activation,
            ctx.clamp,
            grads,
        )
        enc_grad, pred_grad, weight_grad = (g.to(t.dtype) for g, t in zip(grads, (enc_proj, pred_proj, weight)))
        bias_grad = None if bias is None else grads[3].to(bias.dtype)
        return (enc_grad, pred_grad, weight_grad, bias_grad, None, None, None, None)


class FlashGroup(FusedGroup):
    """A group of the sample-wise loss run by the flash kernels: the fused runner's projections (with autograd)
    and their float32 gradient sums, and no step: ``log_probs`` forms the group's lattice values and
    ``backprop_lattice`` every gradient, from the recursions' statistics."""

    def __init__(self, runner: FlashRunner, encoder: torch.Tensor, predictor: torch.Tensor, needs: Needs) -> None:
        super().__init__(runner, encoder, predictor, needs)
        if self.projected:  # the backward kernel adds into it (atomics), the fused runner's steps write it
            self.encoder_proj_grad.zero_()
        # (n, T_g, H), (n, U_g+1, H): the kernels read rows by flat offsets
        self.encoder_rows = self.encoder_proj.detach().contiguous()
        self.predictor_rows = self.predictor_proj.detach().contiguous()

    def log_probs(self, sequences: Sequences, blank: int, bad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log_probs (n, T_g, U_g+1, 2), denominators (n, T_g, U_g+1)) float32; flags `bad` (n,) as the ops."""
        runner = self.runner
        return flash_log_probs(
            self.encoder_rows,
            self.predictor_rows,
            runner.output_weight.detach(),
            None if runner.output_bias is None else runner.output_bias.detach(),
            sequences,
            blank,
            runner.activation,
            bad,
        )

    def backprop_lattice(
        self, stats: LatticeStats, sequences: Sequences, blank: int, weights: torch.Tensor, clamp: float | None
    ) -> StepGrads:
        """The output layer's gradients for upstream `weights` (n,); the projections' are added into the group's
        sums (``finish`` takes them through the projections)."""
        runner = self.runner
        weight, bias = runner.output_weight, runner.output_bias
        if self.projected:
            encoder_grad, predictor_grad = self.encoder_proj_grad, self.predictor_proj_grad
        else:  # frozen projections and no input gradient: the kernel writes them anyway
            encoder_grad, predictor_grad = _zeros(self.encoder_rows, self.predictor_rows)
        weight_grad, bias_grad = _zeros(weight, weight[:, 0])  # (V, H), (V,)
        flash_grads(
            self.encoder_rows,
            self.predictor_rows,
            weight.detach(),
            None if bias is None else bias.detach(),
            sequences,
            stats,
            weights.float().contiguous(),
            blank,
            runner.activation,
            clamp,
            (encoder_grad, predictor_grad, weight_grad, bias_grad),
        )
        output_grads = {}
        if self.needs.params and weight.requires_grad:
            output_grads[id(weight)] = weight_grad.to(weight.dtype)
        if self.needs.params and bias is not None and bias.requires_grad:
            output_grads[id(bias)] = bias_grad.to(bias.dtype)
        return StepGrads(None, None, [output_grads.get(id(leaf)) for leaf in runner.trainable_leaves])


class FlashRunner(FusedRunner):
    """A standard joint the flash joint can compute (``runners.flash_declines`` is None) as the sample-wise loss's
    per-group runner: no logits, so no steps and no T-chunks; the planner sizes its groups with
    ``planning.flash_cell_bytes``."""

    name = "flash"
    flash = True
    records_rng = False  # no dropout

    def __init__(self, joint: StandardJoint) -> None:
        reason = flash_declines(joint)
        if reason is not None:
            raise ValueError(f"flash joint: cannot run this joint: {reason}")
        super().__init__(joint, joint.fused_activation, 0.0)

    def begin(self, encoder: torch.Tensor, predictor: torch.Tensor, needs: Needs) -> FlashGroup:
        """Open a group (inside ``with_leaves``): `needs` of its gradient pass, Needs() for losses only."""
        return FlashGroup(self, encoder, predictor, needs)


def flash_transducer_loss(
    encoder_out: torch.Tensor,  # (B, T, H_e)
    predictor_out: torch.Tensor,  # (B, U+1, H_p)
    joint: StandardJoint,
    targets: torch.Tensor,  # (B, U)
    logit_lengths: torch.Tensor,  # (B,)
    target_lengths: torch.Tensor,  # (B,)
    lattice: RNNT | Mapping[str, Any] | None = None,
    **options: Any,
) -> torch.Tensor:
    """The RNN-T loss of ``joint(encoder_out, predictor_out)``, equal to ``transducer_loss`` of those logits in
    value and in every gradient (inputs, projections, output layer), with per-cell memory independent of V.
    `lattice`: an ``RNNT`` (its clamp is honoured); TDT and FastEmit are declined by name. `options`: ``blank``
    and ``reduction`` (``LossOptions``; the kernels are Triton's)."""
    checked = LossOptions(lattice=lattice, **options)
    lattice, blank = checked.lattice, checked.blank
    if not isinstance(lattice, RNNT) or lattice.fastemit_lambda:
        raise ValueError(f"flash joint: computes the RNN-T lattice without FastEmit, got {lattice!r}")
    if checked.backend not in ("auto", "triton"):
        raise ValueError(f"flash joint: its kernels are Triton's, got backend={checked.backend!r}")
    clamp = lattice.clamp
    resolve_backend(encoder_out.device, "triton")
    reason = flash_declines(joint)
    if reason is not None:
        raise ValueError(f"flash joint: cannot run this joint: {reason}")
    sequences = check_joint_inputs(encoder_out, predictor_out, targets, logit_lengths, target_lengths)
    check_vocabulary(sequences, joint.output.out_features, blank, 0)
    enc_proj = joint.project_encoder(encoder_out).contiguous()  # (B, T, H)
    pred_proj = joint.project_predictor(predictor_out).contiguous()  # (B, U+1, H)
    nll = _FlashRNNTLoss.apply(
        enc_proj, pred_proj, joint.output.weight, joint.output.bias, sequences, blank, joint.fused_activation, clamp
    )
    return reduce_losses(nll, checked.reduction)
