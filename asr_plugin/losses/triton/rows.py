"""The fused log-softmax and gather kernels (the ``*_log_probs`` ops): per valid row of a T-chunk of logits,
only what the recursions read and the row denominators, in the accumulation dtype.

Every program takes BLOCK_R label positions of one frame of one sample (``row_coordinates``) and walks their
scores in BLOCK_V-wide tiles (an online log-sum-exp), so any V fits. Offsets are int64 throughout (logits over 2^31 elements).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .lattice_math import is_bad, not_finite, online_lse_update, row_lse


@triton.jit
def row_coordinates(Tc, U1, t_offset, T_len_ptr, U_len_ptr, BLOCK_R: tl.constexpr):
    """The rows of this program: program (i, j) takes label positions u in [j * BLOCK_R, (j + 1) * BLOCK_R) of
    frame row i = n * Tc + (t - t_offset) of an (N, Tc, U1) grid (no vector division). Returns rows (BLOCK_R,)
    int64, the sample n (int64) and its frame t, u (BLOCK_R,), the sample's T_n and U_n, whether each row is in
    the grid, and whether it is a valid cell (t < T_n, u <= U_n)."""
    frame_row = tl.program_id(0)
    n = (frame_row // Tc).to(tl.int64)
    t = frame_row % Tc + t_offset
    u = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    rows = frame_row.to(tl.int64) * U1 + u
    T_n = tl.load(T_len_ptr + n)
    U_n = tl.load(U_len_ptr + n)
    in_grid = u < U1
    return rows, n, t, u, T_n, U_n, in_grid, in_grid & (t < T_n) & (u <= U_n)


@triton.jit
def flag_bad(bad_ptr, n, bad):
    """bad[n] = 1 when any lane of `bad` (BLOCK_R,) is set (several programs may flag one sample; they only
    ever store 1)."""
    any_bad = tl.max(bad.to(tl.int32), axis=0) > 0
    tl.store(bad_ptr + n, tl.full((), 1, tl.uint8), mask=any_bad)


@triton.jit
def token_log_probs(x_ptr, tgt_ptr, U, n, u, U_n, rows, valid, W, den):
    """log softmax(tokens)[blank column] and [label y_u] (-inf at u == U_n) of valid rows, given their denominator."""
    has_label = valid & (u < U_n)
    label = tl.load(tgt_ptr + n * U + u, mask=has_label, other=0)
    x_label = tl.load(x_ptr + rows * W + label, mask=has_label, other=0.0).to(den.dtype)
    return tl.where(has_label, x_label - den, -float("inf"))


@triton.jit
def store_rnnt_log_probs(lp_ptr, den_ptr, bad_ptr, rows, n, in_grid, valid, den, blank_lp, label_lp):
    """The RNN-T log-probs op's outputs for rows (BLOCK_R,): log_probs [blank, label] and denominators, zeros
    outside valid rows; flags sample n when a valid row is not finite."""
    tl.store(lp_ptr + 2 * rows, tl.where(valid, blank_lp, 0.0), mask=in_grid)
    tl.store(lp_ptr + 2 * rows + 1, tl.where(valid, label_lp, 0.0), mask=in_grid)
    tl.store(den_ptr + rows, tl.where(valid, den, 0.0), mask=in_grid)
    flag_bad(bad_ptr, n, valid & (not_finite(den) | is_bad(blank_lp) | is_bad(label_lp)))


@triton.jit
def rnnt_log_probs_kernel(
    x_ptr,
    tgt_ptr,
    T_len_ptr,
    U_len_ptr,
    lp_ptr,
    den_ptr,
    bad_ptr,
    Tc,
    U1,
    U,
    W,
    V,
    blank,
    t_offset,
    BLOCK_R: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """logits (N, Tc, U1, W) -> log_probs (N, Tc, U1, 2) [blank, label], denominators (N, Tc, U1) over the first V
    scores; zeros outside valid rows; bad[n] = 1 for a sample with a non-finite valid row."""
    ACC: tl.constexpr = lp_ptr.dtype.element_ty
    rows, n, t, u, T_n, U_n, in_grid, valid = row_coordinates(Tc, U1, t_offset, T_len_ptr, U_len_ptr, BLOCK_R)
    den = row_lse(x_ptr, rows, valid, W, 0, V, BLOCK_R, BLOCK_V, ACC)
    x_blank = tl.load(x_ptr + rows * W + blank, mask=valid, other=0.0).to(ACC)
    blank_lp = x_blank - den
    label_lp = token_log_probs(x_ptr, tgt_ptr, U, n, u, U_n, rows, valid, W, den)
    store_rnnt_log_probs(lp_ptr, den_ptr, bad_ptr, rows, n, in_grid, valid, den, blank_lp, label_lp)


@triton.jit
def tdt_log_probs_kernel(
    x_ptr,
    tgt_ptr,
    T_len_ptr,
    U_len_ptr,
    lp_ptr,
    den_ptr,
    bad_ptr,
    Tc,
    U1,
    U,
    W,
    V,
    D,
    blank,
    t_offset,
    sigma: tl.float64,
    BLOCK_R: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """logits (N, Tc, U1, V + D) -> log_probs (N, Tc, U1, 2 + D) [blank - sigma, label - sigma, q_0 .. q_{D-1}],
    denominators (N, Tc, U1, 2) [tokens, durations]; zeros outside valid rows; flags bad samples."""
    ACC: tl.constexpr = lp_ptr.dtype.element_ty
    S = 2 + D
    rows, n, t, u, T_n, U_n, in_grid, valid = row_coordinates(Tc, U1, t_offset, T_len_ptr, U_len_ptr, BLOCK_R)
    sigma = tl.cast(sigma, ACC)  # rounded once, as the C++ kernels' static_cast
    den = row_lse(x_ptr, rows, valid, W, 0, V, BLOCK_R, BLOCK_V, ACC)
    x_blank = tl.load(x_ptr + rows * W + blank, mask=valid, other=0.0).to(ACC)
    blank_lp = x_blank - den - sigma
    label_lp = token_log_probs(x_ptr, tgt_ptr, U, n, u, U_n, rows, valid, W, den) - sigma
    # the duration head: all D scores in one tile (D <= 32)
    i = tl.arange(0, BLOCK_D)
    duration_mask = valid[:, None] & (i < D)[None, :]
    durations = tl.load(x_ptr + rows[:, None] * W + V + i[None, :], mask=duration_mask, other=-float("inf")).to(ACC)
    duration_max, duration_sum = online_lse_update(
        tl.full((BLOCK_R,), -float("inf"), ACC), tl.zeros((BLOCK_R,), ACC), durations
    )
    duration_den = tl.where(duration_max == -float("inf"), 0.0, duration_max) + tl.log(duration_sum)
    duration_lp = durations - duration_den[:, None]
    tl.store(lp_ptr + S * rows, tl.where(valid, blank_lp, 0.0), mask=in_grid)
    tl.store(lp_ptr + S * rows + 1, tl.where(valid, label_lp, 0.0), mask=in_grid)
    store_mask = in_grid[:, None] & (i < D)[None, :]
    tl.store(lp_ptr + S * rows[:, None] + 2 + i[None, :], tl.where(duration_mask, duration_lp, 0.0), mask=store_mask)
    tl.store(den_ptr + 2 * rows, tl.where(valid, den, 0.0), mask=in_grid)
    tl.store(den_ptr + 2 * rows + 1, tl.where(valid, duration_den, 0.0), mask=in_grid)
    bad_duration = tl.max(tl.where(duration_mask & is_bad(duration_lp), 1, 0), axis=1) > 0
    flag_bad(
        bad_ptr,
        n,
        valid & (not_finite(den) | not_finite(duration_den) | is_bad(blank_lp) | is_bad(label_lp) | bad_duration),
    )
