"""The alpha/beta recursions (the ``*_alphas_betas`` ops): one program per sample, along anti-diagonals t + u.

Every arc of both lattices increases t + u (an RNN-T blank or label by one; a TDT arc of duration d by d or
d + 1), so the cells of one anti-diagonal depend only on earlier ones: a diagonal is computed in BLOCK_U-wide
pieces, then a barrier makes its values visible to every thread of the program before the next one reads them
(global memory, the program's own writes). Cells outside the sample's lattice stay 0 (the tensors start zeroed).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .lattice_math import log_add

NEG_INF = tl.constexpr(-float("inf"))


@triton.jit
def diagonal_cells(k, u0, lanes, T_n, U_n, base, U1):
    """Cells (t = k - u, u) of anti-diagonal k for u in u0 + lanes: u, t, whether each is in the sample's lattice,
    and its index c in the (N, T, U1) tensors (`base`: the sample's first cell)."""
    u = u0 + lanes
    t = k - u
    return u, t, (u <= U_n) & (t >= 0) & (t < T_n), base + t * U1 + u


@triton.jit
def rnnt_alphas_betas_kernel(
    lp_ptr,
    T_len_ptr,
    U_len_ptr,
    alpha_ptr,
    beta_ptr,
    nll_ptr,
    T,
    U1,
    BLOCK_U: tl.constexpr,
):
    """log_probs (N, T, U1, 2) [blank, label] -> alphas, betas (N, T, U1) and nll (N,) = -beta(0, 0)."""
    n = tl.program_id(0).to(tl.int64)
    T_n = tl.load(T_len_ptr + n)
    U_n = tl.load(U_len_ptr + n)
    base = n * T * U1
    lanes = tl.arange(0, BLOCK_U)
    for k in range(T_n + U_n):
        for u0 in range(0, U_n + 1, BLOCK_U):
            u, t, valid, c = diagonal_cells(k, u0, lanes, T_n, U_n, base, U1)
            value = tl.where((t == 0) & (u == 0), 0.0, NEG_INF)
            from_blank = valid & (t > 0)
            blank = tl.load(alpha_ptr + c - U1, mask=from_blank, other=0.0) + tl.load(
                lp_ptr + 2 * (c - U1), mask=from_blank, other=0.0
            )
            value = log_add(value, tl.where(from_blank, blank, NEG_INF))
            from_label = valid & (u > 0)
            label = tl.load(alpha_ptr + c - 1, mask=from_label, other=0.0) + tl.load(
                lp_ptr + 2 * (c - 1) + 1, mask=from_label, other=0.0
            )
            value = log_add(value, tl.where(from_label, label, NEG_INF))
            tl.store(alpha_ptr + c, value, mask=valid)
        tl.debug_barrier()
    for step in range(T_n + U_n):
        k = T_n - 1 + U_n - step
        for u0 in range(0, U_n + 1, BLOCK_U):
            u, t, valid, c = diagonal_cells(k, u0, lanes, T_n, U_n, base, U1)
            blank_lp = tl.load(lp_ptr + 2 * c, mask=valid, other=0.0)
            value = tl.where((t == T_n - 1) & (u == U_n), blank_lp, NEG_INF)
            to_blank = valid & (t + 1 < T_n)
            value = log_add(
                value, tl.where(to_blank, tl.load(beta_ptr + c + U1, mask=to_blank, other=0.0) + blank_lp, NEG_INF)
            )
            to_label = valid & (u < U_n)
            label = tl.load(beta_ptr + c + 1, mask=to_label, other=0.0) + tl.load(
                lp_ptr + 2 * c + 1, mask=to_label, other=0.0
            )
            value = log_add(value, tl.where(to_label, label, NEG_INF))
            tl.store(beta_ptr + c, value, mask=valid)
        tl.debug_barrier()
    tl.store(nll_ptr + n, -tl.load(beta_ptr + base))


@triton.jit
def tdt_alphas_betas_kernel(
    lp_ptr,
    T_len_ptr,
    U_len_ptr,
    dur_ptr,
    alpha_ptr,
    beta_ptr,
    nll_ptr,
    T,
    U1,
    D,
    BLOCK_U: tl.constexpr,
):
    """log_probs (N, T, U1, 2 + D) [b, y, q_0 .. q_{D-1}] and the D durations (sorted, d_0 = 0, d_1 = 1) ->
    alphas, betas (N, T, U1), nll (N,); the recursions of csrc/tdt.h."""
    n = tl.program_id(0).to(tl.int64)
    T_n = tl.load(T_len_ptr + n)
    U_n = tl.load(U_len_ptr + n)
    S = 2 + D
    base = n * T * U1
    lanes = tl.arange(0, BLOCK_U)
    for k in range(T_n + U_n):
        for u0 in range(0, U_n + 1, BLOCK_U):
            u, t, valid, _ = diagonal_cells(k, u0, lanes, T_n, U_n, base, U1)
            value = tl.where((t == 0) & (u == 0), 0.0, NEG_INF)
            for i in range(D):
                d = tl.load(dur_ptr + i)
                source = base + (t - d) * U1 + u  # cell (t - d, u)
                from_blank = valid & (d <= t) & (d >= 1)
                blank = (
                    tl.load(alpha_ptr + source, mask=from_blank, other=0.0)
                    + tl.load(lp_ptr + S * source, mask=from_blank, other=0.0)
                    + tl.load(lp_ptr + S * source + 2 + i, mask=from_blank, other=0.0)
                )
                value = log_add(value, tl.where(from_blank, blank, NEG_INF))
                from_label = valid & (d <= t) & (u >= 1)
                label = (
                    tl.load(alpha_ptr + source - 1, mask=from_label, other=0.0)
                    + tl.load(lp_ptr + S * (source - 1) + 1, mask=from_label, other=0.0)
                    + tl.load(lp_ptr + S * (source - 1) + 2 + i, mask=from_label, other=0.0)
                )
                value = log_add(value, tl.where(from_label, label, NEG_INF))
            # the cell's index formed here, not kept live through the durations (it spilled on sm_80)
            tl.store(alpha_ptr + base + t * U1 + u, value, mask=valid)
        tl.debug_barrier()
    for step in range(T_n + U_n):
        k = T_n - 1 + U_n - step
        for u0 in range(0, U_n + 1, BLOCK_U):
            u, t, valid, c = diagonal_cells(k, u0, lanes, T_n, U_n, base, U1)
            blank_lp = tl.load(lp_ptr + S * c, mask=valid, other=0.0)
            label_lp = tl.load(lp_ptr + S * c + 1, mask=valid, other=0.0)
            value = tl.full((BLOCK_U,), NEG_INF, blank_lp.dtype)
            for i in range(D):
                d = tl.load(dur_ptr + i)
                q = tl.load(lp_ptr + S * c + 2 + i, mask=valid, other=0.0)
                inside = valid & (t + d < T_n)
                to_blank = inside & (d >= 1)
                blank = tl.load(beta_ptr + c + d * U1, mask=to_blank, other=0.0) + blank_lp + q
                value = log_add(value, tl.where(to_blank, blank, NEG_INF))
                to_label = inside & (u < U_n)
                label = tl.load(beta_ptr + c + d * U1 + 1, mask=to_label, other=0.0) + label_lp + q
                value = log_add(value, tl.where(to_label, label, NEG_INF))
                ends = valid & (t + d == T_n) & (u == U_n) & (d >= 1)
                value = log_add(value, tl.where(ends, blank_lp + q, NEG_INF))
            tl.store(beta_ptr + c, value, mask=valid)
        tl.debug_barrier()
    tl.store(nll_ptr + n, -tl.load(beta_ptr + base))
