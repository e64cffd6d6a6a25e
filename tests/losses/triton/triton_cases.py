"""The C++ and Triton op namespaces and random op inputs shared by the Triton tests (a module of its own, not
conftest.py, so test files can import it by a name no other test directory uses)."""

from __future__ import annotations

import torch
from loss_lattices import random_lattice

from asr_plugin.losses.extension import ops_for

CPU = torch.device("cpu")
# Logits dtypes the loss accepts; float64 is for checks (float64 accumulation).
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def cpp_ops():
    return ops_for(CPU, "cpp")


def triton_ops():
    return ops_for(CPU, "triton")


def random_inputs(batch, frames, labels, width, vocab, blank=0, dtype=torch.float32, seed=0):
    """logits (B, T, U+1, width) and a lattice whose labels are < vocab (the first sample at the full T and U)."""
    generator = torch.Generator().manual_seed(seed)
    logits = (2 * torch.randn(batch, frames, labels + 1, width, generator=generator, dtype=torch.float64)).to(dtype)
    return (logits, *random_lattice(batch, frames, labels, vocab, blank, generator))


def tolerance(dtype: torch.dtype) -> dict:
    """Triton and C++ accumulate alike (float32, float64 for float64 logits); they differ in summation order."""
    if dtype == torch.float64:
        # the interpreter passes the Python float arguments (clamp, sigma) as float32 constants
        return dict(rtol=1e-8, atol=1e-8)
    if dtype == torch.float32:
        return dict(rtol=2e-5, atol=2e-5)
    # the gradients are written in the logits' 16-bit dtype: one rounding step apart at most
    return dict(rtol=1e-2, atol=2e-3)
