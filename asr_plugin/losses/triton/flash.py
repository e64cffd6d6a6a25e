"""The flash joint's op wrappers: ``flash_log_probs`` and ``flash_grads`` launch the ``flash_joint`` kernels on a
standard joint's projections (``output(act(enc_proj + pred_proj))``), so no (N, T, U+1, V) tensor exists: per
lattice cell only the two log-probs and the denominator (forward) and the recursions' alpha and beta (backward)
are read or written (float32, as ``RNNT.values_per_cell``). The loss and the sample-wise runner built on them
are ``asr_plugin.losses.flash``. They need the Triton backend's device: CUDA tensors, or CPU tensors under
``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import torch

from .._validation import Sequences
from ..lattices import LatticeStats
from . import ops
from .configs import flash_config
from .flash_joint import flash_grads_kernel, flash_log_probs_kernel


def _kernel_args(enc_proj, pred_proj, weight, bias, sequences: Sequences) -> tuple:
    """The arguments both flash kernels start with: the projections, the output layer (the weight stands in for
    a missing bias, never read then) and the lattice."""
    return (enc_proj, pred_proj, weight, weight if bias is None else bias, *sequences.tensors())


def _kernel_options(enc_proj, pred_proj, weight, bias, sequences: Sequences, blank: int, activation: str):
    """The scalar and compile-time arguments both flash kernels end with, and their launch grid and warps."""
    N, T, H = enc_proj.shape
    config = flash_config()
    scalars = (T, pred_proj.shape[1], sequences.targets.shape[1], H, weight.shape[0], blank)
    blocks = dict(
        HAS_BIAS=bias is not None,
        ACT=activation,
        BLOCK_U=config.block_u,
        BLOCK_V=config.block_v,
        BLOCK_K=config.block_k,
        num_warps=config.num_warps,
    )
    return config.grid(N * T, pred_proj.shape[1]), scalars, blocks


def flash_log_probs(
    enc_proj: torch.Tensor,  # (N, T, H), contiguous
    pred_proj: torch.Tensor,  # (N, U+1, H), contiguous
    weight: torch.Tensor,  # (V, H) W_out
    bias: torch.Tensor | None,  # (V,)
    sequences: Sequences,
    blank: int,
    activation: str,
    bad: torch.Tensor,  # (N,) bool, contiguous
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log_probs (N, T, U+1, 2) [blank, label], denominators (N, T, U+1)) float32 of the joint's logits, as the
    ``transducer_log_probs`` op would give them, without the logits; sets ``bad[n]`` for a sample with a
    non-finite valid row (never clears it)."""
    N, T, _ = enc_proj.shape
    log_probs = enc_proj.new_empty((N, T, pred_proj.shape[1], 2), dtype=torch.float32)
    denominators = enc_proj.new_empty((N, T, pred_proj.shape[1]), dtype=torch.float32)
    grid, scalars, blocks = _kernel_options(enc_proj, pred_proj, weight, bias, sequences, blank, activation)
    with ops.launch_device(enc_proj.device):
        flash_log_probs_kernel[grid](
            *_kernel_args(enc_proj, pred_proj, weight, bias, sequences),
            log_probs,
            denominators,
            bad.view(torch.uint8),
            *scalars,
            **blocks,
        )
    return log_probs, denominators


def flash_grads(
    enc_proj: torch.Tensor,  # (N, T, H), contiguous
    pred_proj: torch.Tensor,  # (N, U+1, H), contiguous
    weight: torch.Tensor,  # (V, H)
    bias: torch.Tensor | None,  # (V,)
    sequences: Sequences,
    stats: LatticeStats,  # from flash_log_probs and the recursions
    weights: torch.Tensor,  # (N,) float32, contiguous: each sample's upstream gradient
    blank: int,
    activation: str,
    clamp: float | None,
    out: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    """Adds weights[n] * d nll[n] / d (enc_proj, pred_proj, W_out, b), the logits gradient clamped as
    ``transducer_logits_grad``'s, into `out`: float32 buffers shaped as those four (the bias's (V,) even without
    a bias), zeroed or holding earlier sums."""
    grid, scalars, blocks = _kernel_options(enc_proj, pred_proj, weight, bias, sequences, blank, activation)
    with ops.launch_device(enc_proj.device):
        flash_grads_kernel[grid](
            *_kernel_args(enc_proj, pred_proj, weight, bias, sequences),
            stats.log_probs,
            stats.denominators,
            stats.alphas,
            stats.betas,
            stats.nll,
            weights,
            *out,
            *scalars,
            0.0 if clamp is None else float(clamp),
            **blocks,
        )
