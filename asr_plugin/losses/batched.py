"""Batched transducer loss: the caller materialises the full (B, T, U+1, V [+ D]) joint output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ._validation import Sequences, check_finite, check_float_input, check_sequences, check_vocabulary
from .lattices import LatticeStats, TransducerLattice
from .options import LossOptions


def reduce_losses(nll: torch.Tensor, reduction: str) -> torch.Tensor:
    """(B,) per-sample losses -> "none": (B,), "sum"/"mean" (over the batch, as torchaudio): scalar."""
    if reduction == "sum":
        return nll.sum()
    if reduction == "mean":
        return nll.mean()
    return nll


def check_logits_inputs(logits, targets, logit_lengths, target_lengths, blank: int, extra_outputs: int) -> Sequences:
    check_float_input("logits", logits, 4, "(B, T, U+1, V + D)" if extra_outputs else "(B, T, U+1, V)")
    batch, frames, labels_plus_one, width = logits.shape
    sequences = check_sequences(
        targets,
        logit_lengths,
        target_lengths,
        batch=batch,
        frames=frames,
        labels_plus_one=labels_plus_one,
        device=logits.device,
        source="logits",
    )
    check_vocabulary(sequences, width, blank, extra_outputs)
    return sequences


class _BatchedTransducerLoss(torch.autograd.Function):
    """logits (B, T, U+1, W) -> per-sample nll (B,); the logits gradient is computed in backward, already
    multiplied by the upstream gradient, so only one logits-sized buffer (the gradient) is ever allocated."""

    @staticmethod
    def forward(
        ctx, logits: torch.Tensor, sequences: Sequences, lattice: TransducerLattice, blank: int
    ) -> torch.Tensor:
        bad = torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
        log_probs, denominators = lattice.log_probs(logits, sequences, blank, bad)
        check_finite(bad)
        stats = lattice.recursions(log_probs, denominators, sequences)
        ctx.save_for_backward(logits, *stats)
        ctx.sequences, ctx.lattice, ctx.blank = sequences, lattice, blank
        return lattice.loss_values(stats.nll).clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: torch.Tensor):
        logits, *stats = ctx.saved_tensors
        weights = grad_nll.to(stats[-1].dtype).contiguous()
        grad = ctx.lattice.logits_grad(logits, LatticeStats(*stats), ctx.sequences, ctx.blank, weights, inplace=False)
        return grad, None, None, None


@torch.compiler.disable
def batched_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    options: LossOptions,
) -> torch.Tensor:
    """Transducer negative log-likelihood from full joint-network scores over `options.lattice` (RNN-T, or TDT).

    Args:
        logits: (B, T, U+1, V) raw scores (TDT: (B, T, U+1, V + D), V token scores then D duration scores),
            float32/float16/bfloat16 (float64 for checks); the log-softmax (of each head) is fused inside the
            kernel and accumulated in float32.
        targets: (B, U) label ids, any integer dtype; positions past ``target_lengths[b]`` are ignored.
        logit_lengths: (B,) frames T_b per sample, 1 <= T_b <= T.
        target_lengths: (B,) labels U_b per sample, 0 <= U_b <= U.
        options: the lattice (the last dimension of `logits` holds V token scores, then its
            ``num_extra_outputs``: TDT's D duration scores), blank, reduction ("none" -> (B,) float32 losses),
            omega and kernels (``LossOptions``, checked when built).
    """
    lattice, blank = options.lattice, options.blank
    sequences = check_logits_inputs(logits, targets, logit_lengths, target_lengths, blank, lattice.num_extra_outputs)
    call_lattice = lattice.for_call(options.omega).on_backend(options.backend)
    nll = _BatchedTransducerLoss.apply(logits, sequences, call_lattice, blank)
    return reduce_losses(nll, options.reduction)


@torch.compiler.disable
def transducer_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    lattice: TransducerLattice | Mapping[str, Any] | None = None,
    **options: Any,
) -> torch.Tensor:
    """``batched_loss`` for direct callers: `lattice` (``RNNT(clamp=None, fastemit_lambda=0.0)``, None:
    ``RNNT()``, or ``TDT(durations, sigma=0.0, clamp=None)``, or its record) and the keyword `options` are
    ``LossOptions``'s (blank, reduction, omega, backend), checked here, e.g. ``transducer_loss(logits, targets,
    logit_lengths, target_lengths, TDT([0, 1, 2, 3, 4]), reduction="sum")``."""
    checked = LossOptions(lattice=lattice, **options)
    return batched_loss(logits, targets, logit_lengths, target_lengths, checked)
