"""The Triton ops, with exactly the signatures of the C++ ops (``torch.ops.asr_plugin.*``, schemas in
``csrc/transducer.cpp``), so ``extension.ops_for(device, "triton")`` can hand out this module in their place.

Each op checks what its kernels assume (dense tensors on one device, int64 lattices, accumulation dtypes),
allocates its outputs as the C++ op does and launches one kernel on the tensors' device.
"""

from __future__ import annotations

import contextlib

import torch

from . import grads, recursions, rows
from .configs import recursion_config, row_config
from .interpreter import fix_scalar_index


def interpreting() -> bool:
    """Whether the kernels were defined under ``TRITON_INTERPRET=1`` (they then run on CPU tensors only)."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(rows.rnnt_log_probs_kernel, InterpretedFunction)


if interpreting():
    fix_scalar_index()


def _check(op: str, device: torch.device, **tensors: torch.Tensor) -> None:
    for name, tensor in tensors.items():
        if tensor.device != device:
            raise RuntimeError(f"{op} (triton): {name} is on {tensor.device}, expected {device}")
        if not tensor.is_contiguous():
            raise RuntimeError(f"{op} (triton): {name} must be contiguous")


def _check_lattice(op: str, targets, logit_lengths, target_lengths, batch: int) -> None:
    for name, tensor in (("targets", targets), ("logit_lengths", logit_lengths), ("target_lengths", target_lengths)):
        if tensor.dtype != torch.int64 or tensor.shape[0] != batch:
            raise RuntimeError(
                f"{op} (triton): {name} must be int64 with N = {batch} rows, got {tensor.dtype} {tuple(tensor.shape)}"
            )


def _accumulation(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def launch_device(device: torch.device):
    """Launch on `device` (the kernels run on the current CUDA device)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _check_log_probs_args(op, logits, targets, logit_lengths, target_lengths, bad) -> None:
    if logits.dim() != 4 or not logits.is_floating_point():
        raise RuntimeError(f"{op} (triton): logits must be floating (N, Tc, U+1, V)")
    _check(
        op,
        logits.device,
        logits=logits,
        targets=targets,
        logit_lengths=logit_lengths,
        target_lengths=target_lengths,
        bad=bad,
    )
    _check_lattice(op, targets, logit_lengths, target_lengths, logits.shape[0])
    if bad.dtype != torch.bool or bad.shape != (logits.shape[0],):
        raise RuntimeError(f"{op} (triton): bad must be (N,) bool")
    if logits.shape[2] > targets.shape[1] + 1:
        raise RuntimeError(f"{op} (triton): logits have more label positions than targets + 1")


def transducer_log_probs(logits, targets, logit_lengths, target_lengths, blank: int, vocab: int, t_offset: int, bad):
    """logits (N, Tc, U+1, W) -> log_probs (N, Tc, U+1, 2) [blank, label], denominators (N, Tc, U+1) over the
    first `vocab` scores; sets bad[n] for a sample with a non-finite valid row."""
    _check_log_probs_args("transducer_log_probs", logits, targets, logit_lengths, target_lengths, bad)
    N, Tc, U1, W = logits.shape
    if not (2 <= vocab <= W and 0 <= blank < vocab):
        raise RuntimeError(f"transducer_log_probs (triton): need 2 <= vocab <= W = {W} and 0 <= blank < vocab")
    acc = _accumulation(logits.dtype)
    log_probs = logits.new_empty((N, Tc, U1, 2), dtype=acc)
    denominators = logits.new_empty((N, Tc, U1), dtype=acc)
    config = row_config(vocab, U1)
    if N * Tc * U1 == 0:
        return log_probs, denominators
    with launch_device(logits.device):
        rows.rnnt_log_probs_kernel[config.grid(N * Tc, U1)](
            logits,
            targets,
            logit_lengths,
            target_lengths,
            log_probs,
            denominators,
            bad.view(torch.uint8),
            Tc,
            U1,
            targets.shape[1],
            W,
            vocab,
            blank,
            t_offset,
            BLOCK_R=config.block_r,
            BLOCK_V=config.block_v,
            num_warps=config.num_warps,
        )
    return log_probs, denominators


def tdt_log_probs(
    logits, targets, logit_lengths, target_lengths, blank: int, num_durations: int, sigma: float, t_offset: int, bad
):
    """logits (N, Tc, U+1, V + D) -> log_probs (N, Tc, U+1, 2 + D), denominators (N, Tc, U+1, 2)."""
    _check_log_probs_args("tdt_log_probs", logits, targets, logit_lengths, target_lengths, bad)
    N, Tc, U1, W = logits.shape
    D, V = num_durations, W - num_durations
    if not (2 <= D <= 32 and 2 <= V and 0 <= blank < V):
        raise RuntimeError("tdt_log_probs (triton): need 2 <= num_durations <= 32, V = W - D >= 2, 0 <= blank < V")
    acc = _accumulation(logits.dtype)
    log_probs = logits.new_empty((N, Tc, U1, 2 + D), dtype=acc)
    denominators = logits.new_empty((N, Tc, U1, 2), dtype=acc)
    config = row_config(V, U1, D)
    if N * Tc * U1 == 0:
        return log_probs, denominators
    with launch_device(logits.device):
        rows.tdt_log_probs_kernel[config.grid(N * Tc, U1)](
            logits,
            targets,
            logit_lengths,
            target_lengths,
            log_probs,
            denominators,
            bad.view(torch.uint8),
            Tc,
            U1,
            targets.shape[1],
            W,
            V,
            D,
            blank,
            t_offset,
            float(sigma),
            BLOCK_R=config.block_r,
            BLOCK_V=config.block_v,
            BLOCK_D=config.block_d,
            num_warps=config.num_warps,
        )
    return log_probs, denominators


def _recursion_outputs(op, log_probs, logit_lengths, target_lengths, values: int):
    if log_probs.dim() != 4 or log_probs.shape[3] != values or log_probs.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"{op} (triton): log_probs must be float32/float64 (N, T, U+1, {values})")
    _check(op, log_probs.device, log_probs=log_probs, logit_lengths=logit_lengths, target_lengths=target_lengths)
    N, T, U1, _ = log_probs.shape
    return log_probs.new_zeros((N, T, U1)), log_probs.new_zeros((N, T, U1)), log_probs.new_empty((N,))


def _alphas_betas(op: str, kernel, log_probs, logit_lengths, target_lengths, values: int, durations=None):
    """Launch a recursion `kernel` (one program per sample) over log_probs (N, T, U+1, `values`); TDT's kernel
    takes its `durations` (int64 (D,)) after the lattice and D after U+1."""
    alphas, betas, nll = _recursion_outputs(op, log_probs, logit_lengths, target_lengths, values)
    N, T, U1, _ = log_probs.shape
    config = recursion_config(U1)
    arcs, arc_count = ((), ()) if durations is None else ((durations,), (len(durations),))
    with launch_device(log_probs.device):
        kernel[(N,)](
            log_probs,
            logit_lengths,
            target_lengths,
            *arcs,
            alphas,
            betas,
            nll,
            T,
            U1,
            *arc_count,
            BLOCK_U=config.block_u,
            num_warps=config.num_warps,
        )
    return alphas, betas, nll


def transducer_alphas_betas(log_probs, logit_lengths, target_lengths):
    """log_probs (N, T, U+1, 2) -> alphas, betas (N, T, U+1) (0 outside each lattice), nll (N,)."""
    kernel = recursions.rnnt_alphas_betas_kernel
    return _alphas_betas("transducer_alphas_betas", kernel, log_probs, logit_lengths, target_lengths, 2)


def _durations_tensor(durations, device: torch.device) -> torch.Tensor:
    values = list(durations)
    if not (2 <= len(values) <= 32) or values[:2] != [0, 1] or values != sorted(set(values)):
        raise RuntimeError(
            f"tdt op (triton): durations must be sorted, distinct, start with 0, 1 and be at most 32, got {values}"
        )
    return torch.tensor(values, dtype=torch.int64, device=device)


def tdt_alphas_betas(log_probs, logit_lengths, target_lengths, durations):
    """log_probs (N, T, U+1, 2 + D) -> alphas, betas (N, T, U+1), nll (N,)."""
    duration_values = _durations_tensor(durations, log_probs.device)
    kernel, values = recursions.tdt_alphas_betas_kernel, 2 + len(duration_values)
    return _alphas_betas("tdt_alphas_betas", kernel, log_probs, logit_lengths, target_lengths, values, duration_values)


def _check_grad_args(
    op, logits, denominators, log_probs, alphas, betas, nll, targets, logit_lengths, target_lengths, weights, grad
):
    """The gradient ops' tensors, in the order both ops and their kernels take them (``tensors`` there)."""
    _check(
        op,
        logits.device,
        logits=logits,
        denominators=denominators,
        log_probs=log_probs,
        alphas=alphas,
        betas=betas,
        nll=nll,
        targets=targets,
        logit_lengths=logit_lengths,
        target_lengths=target_lengths,
        weights=weights,
        grad=grad,
    )
    _check_lattice(op, targets, logit_lengths, target_lengths, logits.shape[0])
    acc = _accumulation(logits.dtype)
    for name, tensor in (
        ("denominators", denominators),
        ("log_probs", log_probs),
        ("alphas", alphas),
        ("betas", betas),
        ("nll", nll),
        ("weights", weights),
    ):
        if tensor.dtype != acc:
            raise RuntimeError(f"{op} (triton): {name} must be {acc}, got {tensor.dtype}")
    if grad.shape != logits.shape or grad.dtype != logits.dtype:
        raise RuntimeError(f"{op} (triton): grad must have the logits' shape and dtype")


def transducer_logits_grad(
    logits,
    denominators,
    log_probs,
    alphas,
    betas,
    nll,
    targets,
    logit_lengths,
    target_lengths,
    blank: int,
    vocab: int,
    t_offset: int,
    weights,
    clamp: float,
    grad,
    fastemit_lambda: float = 0.0,
) -> None:
    """grad (N, Tc, U+1, W) = weights[n] * clamp(d nll[n] / d logits) of a T-chunk (may alias logits), with
    FastEmit's `fastemit_lambda` as NeMo's numba loss (``grads`` module docstring)."""
    tensors = (logits, denominators, log_probs, alphas, betas, nll, targets, logit_lengths, target_lengths)
    _check_grad_args("transducer_logits_grad", *tensors, weights, grad)
    N, Tc, U1, W = logits.shape
    config = row_config(vocab, U1)
    if N * Tc * U1 == 0:
        return
    with launch_device(logits.device):
        grads.rnnt_logits_grad_kernel[config.grid(N * Tc, U1)](
            *tensors,
            weights,
            grad,
            Tc,
            alphas.shape[1],
            U1,
            targets.shape[1],
            W,
            vocab,
            blank,
            t_offset,
            float(clamp),
            float(fastemit_lambda),
            BLOCK_R=config.block_r,
            BLOCK_V=config.block_v,
            num_warps=config.num_warps,
        )


def tdt_logits_grad(
    logits,
    denominators,
    log_probs,
    alphas,
    betas,
    nll,
    targets,
    logit_lengths,
    target_lengths,
    blank: int,
    durations,
    t_offset: int,
    weights,
    clamp: float,
    grad,
) -> None:
    """grad (N, Tc, U+1, V + D) of a T-chunk (may alias logits): the token scores' clamped, the durations' not."""
    tensors = (logits, denominators, log_probs, alphas, betas, nll, targets, logit_lengths, target_lengths)
    _check_grad_args("tdt_logits_grad", *tensors, weights, grad)
    duration_values = _durations_tensor(durations, logits.device)
    N, Tc, U1, W = logits.shape
    D = len(duration_values)
    config = row_config(W - D, U1, D)
    if N * Tc * U1 == 0:
        return
    with launch_device(logits.device):
        grads.tdt_logits_grad_kernel[config.grid(N * Tc, U1)](
            *tensors,
            duration_values,
            weights,
            grad,
            Tc,
            alphas.shape[1],
            U1,
            targets.shape[1],
            W,
            W - D,
            D,
            blank,
            t_offset,
            float(clamp),
            BLOCK_R=config.block_r,
            BLOCK_V=config.block_v,
            BLOCK_D=config.block_d,
            num_warps=config.num_warps,
        )
