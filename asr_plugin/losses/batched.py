"""Batched transducer loss: the caller materialises the full (B, T, U+1, V) logits."""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import _ops
from ._validation import (
    Lattice,
    check_finite,
    check_float_input,
    check_lattice,
    check_options,
    check_vocabulary,
)


def reduce_losses(nll: torch.Tensor, reduction: str) -> torch.Tensor:
    """(B,) per-sample losses -> "none": (B,), "sum"/"mean" (over the batch, as torchaudio): scalar."""
    if reduction == "sum":
        return nll.sum()
    if reduction == "mean":
        return nll.mean()
    return nll


def check_logits_inputs(logits, targets, logit_lengths, target_lengths, blank, reduction, clamp) -> Lattice:
    check_options(blank, reduction, clamp)
    check_float_input("logits", logits, 4, "(B, T, U+1, V)")
    batch, frames, labels_plus_one, vocab = logits.shape
    lattice = check_lattice(
        targets,
        logit_lengths,
        target_lengths,
        batch=batch,
        frames=frames,
        labels_plus_one=labels_plus_one,
        device=logits.device,
        source="logits",
    )
    check_vocabulary(lattice, vocab, blank)
    return lattice


class _BatchedTransducerLoss(torch.autograd.Function):
    """logits (B, T, U+1, V) -> per-sample nll (B,); the logits gradient is computed in backward, already
    multiplied by the upstream gradient, so only one logits-sized buffer (the gradient) is ever allocated."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, lattice: Lattice, blank: int, clamp: float | None) -> torch.Tensor:
        bad = torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
        log_probs, denominators = _ops.log_probs(logits, lattice, blank, bad)
        check_finite(bad)
        stats = _ops.lattice_stats(log_probs, denominators, lattice)
        ctx.save_for_backward(logits, *stats)
        ctx.lattice, ctx.blank, ctx.clamp = lattice, blank, clamp
        return stats.nll.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: torch.Tensor):
        logits, *stats = ctx.saved_tensors
        grad = _ops.logits_grad(
            logits,
            _ops.LatticeStats(*stats),
            ctx.lattice,
            ctx.blank,
            grad_nll.to(stats[-1].dtype).contiguous(),
            ctx.clamp,
            inplace=False,
        )
        return grad, None, None, None


@torch.compiler.disable
def transducer_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: str = "mean",
    clamp: float | None = None,
) -> torch.Tensor:
    """Transducer (RNN-T) negative log-likelihood from full joint-network scores.

    Args:
        logits: (B, T, U+1, V) raw scores, float32/float16/bfloat16 (float64 for checks); the log-softmax
            is fused inside the kernel and accumulated in float32.
        targets: (B, U) label ids, any integer dtype; positions past ``target_lengths[b]`` are ignored.
        logit_lengths: (B,) frames T_b per sample, 1 <= T_b <= T.
        target_lengths: (B,) labels U_b per sample, 0 <= U_b <= U.
        blank: blank token id.
        reduction: "none" -> (B,) float32 losses; "sum"; "mean" (over the batch, as torchaudio).
        clamp: if set, each element of the logits gradient is clamped to [-clamp, clamp] before the upstream
            gradient is applied (torchaudio's semantics).
    """
    lattice = check_logits_inputs(logits, targets, logit_lengths, target_lengths, blank, reduction, clamp)
    nll = _BatchedTransducerLoss.apply(logits, lattice, blank, clamp)
    return reduce_losses(nll, reduction)
