"""Per-cell math shared by the Triton kernels (the counterpart of ``csrc/transducer.h``)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def log_add(a, b):
    """log(exp(a) + exp(b)), exact when either side is -inf (then the other; -inf when both are)."""
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    safe_hi = tl.where(hi == -float("inf"), 0.0, hi)
    return tl.where(hi == -float("inf"), hi, hi + tl.log(1.0 + tl.exp(lo - safe_hi)))


@triton.jit
def online_lse_update(running_max, running_sum, x):
    """One (BLOCK_R, BLOCK_V) tile `x` folded into per-row running (max, sum of exp(x - max)) (BLOCK_R,). NaN or
    +inf in a row make its sum NaN (via x - max), as ``row_denominator`` in csrc/cpu_math.h."""
    new_max = tl.maximum(running_max, tl.max(x, axis=1))
    # an all -inf row so far: subtract 0 instead of -inf, so exp gives 0 rather than NaN
    safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
    scaled = running_sum * tl.exp(running_max - safe_max)
    return new_max, scaled + tl.sum(tl.exp(x - safe_max[:, None]), axis=1)


@triton.jit
def row_lse(
    x_ptr, rows, row_valid, width, start, count, BLOCK_R: tl.constexpr, BLOCK_V: tl.constexpr, ACC: tl.constexpr
):
    """log-sum-exp over columns [start, start + count) of the rows `rows` (BLOCK_R,) int64 of a row-major matrix of
    `width` columns, in ACC; -inf for rows that are not valid."""
    running_max = tl.full((BLOCK_R,), -float("inf"), ACC)
    running_sum = tl.zeros((BLOCK_R,), ACC)
    columns = tl.arange(0, BLOCK_V)
    for v0 in range(0, count, BLOCK_V):
        v = v0 + columns
        mask = row_valid[:, None] & (v < count)[None, :]
        x = tl.load(x_ptr + rows[:, None] * width + (start + v)[None, :], mask=mask, other=-float("inf")).to(ACC)
        running_max, running_sum = online_lse_update(running_max, running_sum, x)
    safe_max = tl.where(running_max == -float("inf"), 0.0, running_max)
    return safe_max + tl.log(running_sum)


@triton.jit
def is_bad(value):
    """NaN or +inf (a log-prob of -inf is a legitimately masked token)."""
    return (value != value) | (value == float("inf"))


@triton.jit
def not_finite(value):
    return (value != value) | (value == float("inf")) | (value == -float("inf"))


@triton.jit
def clamp_and_weight(g, clamp, weight):
    """Clamp like torchaudio (before the upstream weight; clamp <= 0: none), then weight."""
    clamped = tl.minimum(tl.maximum(g, -clamp), clamp)
    return tl.where(clamp > 0, clamped, g) * weight
