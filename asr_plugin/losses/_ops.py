"""Typed wrappers of the ``torch.ops.asr_plugin`` transducer kernels (CPU and CUDA share these signatures).

Shapes: logits (N, Tc, U+1, V) cover frames [t_offset, t_offset + Tc) of an (N, T, U+1) lattice; every
other per-cell tensor covers the whole lattice. The accumulation dtype ``acc`` is float32 (float64 for
float64 logits).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .extension import ops_for
from ._validation import Lattice


class LatticeStats(NamedTuple):
    """Everything the gradient needs besides the logits themselves."""

    log_probs: torch.Tensor  # (N, T, U+1, 2) acc, [blank, label]
    denominators: torch.Tensor  # (N, T, U+1) acc, log-sum-exp of each logits row
    alphas: torch.Tensor  # (N, T, U+1) acc
    betas: torch.Tensor  # (N, T, U+1) acc
    nll: torch.Tensor  # (N,) acc


def _detached(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` without autograd history (a fused joint's logits have none: no detach op then)."""
    return tensor.detach() if tensor.requires_grad else tensor


def accumulation_dtype(logits_dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if logits_dtype == torch.float64 else torch.float32


def log_probs(
    logits: torch.Tensor, lattice: Lattice, blank: int, bad: torch.Tensor, t_offset: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused log-softmax of a T-chunk: (log_probs (N, Tc, U+1, 2), denominators (N, Tc, U+1)).

    Sets ``bad[n]`` (N,) bool, a contiguous view, for a sample with a non-finite valid row; never clears it.
    """
    ops = ops_for(logits.device)
    return ops.transducer_log_probs(
        _detached(logits).contiguous(),
        lattice.targets,
        lattice.logit_lengths,
        lattice.target_lengths,
        blank,
        t_offset,
        bad,
    )


def lattice_stats(log_probs: torch.Tensor, denominators: torch.Tensor, lattice: Lattice) -> LatticeStats:
    """Run the alpha/beta recursions over whole-lattice log-probs."""
    ops = ops_for(log_probs.device)
    alphas, betas, nll = ops.transducer_alphas_betas(log_probs, lattice.logit_lengths, lattice.target_lengths)
    return LatticeStats(log_probs, denominators, alphas, betas, nll)


def logits_grad(
    logits: torch.Tensor,
    stats: LatticeStats,
    lattice: Lattice,
    blank: int,
    scale: torch.Tensor,
    clamp: float | None,
    inplace: bool,
    t_offset: int = 0,
) -> torch.Tensor:
    """scale[n] * clamp(d nll[n] / d logits) for a T-chunk, in the logits dtype; zero outside valid cells.

    ``scale`` (N,) is contiguous in the accumulation dtype. With ``inplace`` the gradient overwrites
    ``logits`` (when contiguous) and no logits-sized buffer is allocated.
    """
    ops = ops_for(logits.device)
    source = _detached(logits)
    contiguous = source.contiguous()
    grad = source if inplace and contiguous is source else torch.empty_like(contiguous)
    ops.transducer_logits_grad(
        contiguous,
        stats.denominators,
        stats.log_probs,
        stats.alphas,
        stats.betas,
        stats.nll,
        lattice.targets,
        lattice.logit_lengths,
        lattice.target_lengths,
        blank,
        t_offset,
        scale,
        0.0 if clamp is None else float(clamp),
        grad,
    )
    return grad
