"""The logits gradient kernels (the ``*_logits_grad`` ops): per valid row, the posterior flows of its cell from
alphas, betas and log-probs, then the row's scores in BLOCK_V-wide tiles, each read once and its gradient
written in its place (so ``grad`` may alias ``logits``). Rows outside the lattice get zeros.

RNN-T, with FastEmit (Yu et al. 2021) as NeMo's numba loss defines it (the label arcs' posterior scaled by
1 + lambda, through the log-softmax): for a token v of valid cell (t, u)
``g_v = softmax_v * (occupancy + lambda * label_flow) - [v = blank] * blank_flow - [v = y_u] * (1 + lambda) * label_flow``.
TDT: ``csrc/tdt.cpp`` (the token part with the flows summed over durations, clamped; the duration part not).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .lattice_math import clamp_and_weight
from .rows import row_coordinates


@triton.jit
def cell_statistics(alpha_ptr, beta_ptr, nll_ptr, weights_ptr, den_ptr, den_stride, n, t, u, T, U1, valid):
    """Whole-lattice cell index c, alpha(t, u) + nll (= alpha - log P), beta(t, u), the token denominator and the
    sample's weight (a scalar), of rows (BLOCK_R,) of sample n (int64)."""
    c = (n * T + t) * U1 + u
    a = tl.load(alpha_ptr + c, mask=valid, other=0.0) + tl.load(nll_ptr + n)
    beta = tl.load(beta_ptr + c, mask=valid, other=0.0)
    den = tl.load(den_ptr + den_stride * c, mask=valid, other=0.0)
    weight = tl.load(weights_ptr + n)
    return c, a, beta, den, weight


@triton.jit
def rnnt_cell_flows(lp_ptr, beta_ptr, c, a, beta, t, u, T_n, U_n, U1, valid):
    """Occupancy and the posterior flows through the blank and the label arc of RNN-T cells (csrc/transducer.h,
    ``cell_flows``); `a` = alpha + nll, `beta` = beta(t, u); zeros outside valid cells."""
    blank_lp = tl.load(lp_ptr + 2 * c, mask=valid, other=0.0)
    occupancy = tl.where(valid, tl.exp(a + beta), 0.0)
    advances = valid & (t + 1 < T_n)
    beta_next_frame = tl.load(beta_ptr + c + U1, mask=advances, other=0.0)
    ends = valid & (t + 1 == T_n) & (u == U_n)
    blank_flow = tl.where(advances, tl.exp(a + blank_lp + beta_next_frame), tl.where(ends, tl.exp(a + blank_lp), 0.0))
    has_label = valid & (u < U_n)
    label_lp = tl.load(lp_ptr + 2 * c + 1, mask=has_label, other=0.0)
    beta_next_label = tl.load(beta_ptr + c + 1, mask=has_label, other=0.0)
    label_flow = tl.where(has_label, tl.exp(a + label_lp + beta_next_label), 0.0)
    return occupancy, blank_flow, label_flow


@triton.jit
def store_token_grads(
    x_ptr,
    g_ptr,
    rows,
    valid,
    in_grid,
    W,
    V,
    columns_end,
    blank,
    label,
    den,
    occupancy,
    blank_flow,
    label_flow,
    clamp,
    weight,
    BLOCK_V: tl.constexpr,
):
    """g[row, v] = weight * clamp(softmax_v * occupancy - [v = blank] blank_flow - [v = label] label_flow) for
    v < V, 0 for V <= v < columns_end (columns the lattice does not score), in the gradient's dtype."""
    columns = tl.arange(0, BLOCK_V)
    for v0 in range(0, columns_end, BLOCK_V):
        v = v0 + columns
        offsets = rows[:, None] * W + v[None, :]
        scored = valid[:, None] & (v < V)[None, :]
        x = tl.load(x_ptr + offsets, mask=scored, other=0.0).to(den.dtype)
        g = tl.exp(x - den[:, None]) * occupancy[:, None]
        g -= tl.where(v[None, :] == blank, blank_flow[:, None], 0.0)
        g -= tl.where(v[None, :] == label[:, None], label_flow[:, None], 0.0)
        g = clamp_and_weight(g, clamp, weight)
        store = in_grid[:, None] & (v < columns_end)[None, :]
        tl.store(g_ptr + offsets, tl.where(scored, g, 0.0).to(g_ptr.dtype.element_ty), mask=store)


@triton.jit
def rnnt_logits_grad_kernel(
    x_ptr,
    den_ptr,
    lp_ptr,
    alpha_ptr,
    beta_ptr,
    nll_ptr,
    tgt_ptr,
    T_len_ptr,
    U_len_ptr,
    weights_ptr,
    g_ptr,
    Tc,
    T,
    U1,
    U,
    W,
    V,
    blank,
    t_offset,
    clamp: tl.float64,
    fastemit_lambda: tl.float64,
    BLOCK_R: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """grad (N, Tc, U1, W) = weights[n] * clamp(d nll[n] / d logits) of a T-chunk (FastEmit as the module says)."""
    rows, n, t, u, T_n, U_n, in_grid, valid = row_coordinates(Tc, U1, t_offset, T_len_ptr, U_len_ptr, BLOCK_R)
    c, a, beta, den, weight = cell_statistics(
        alpha_ptr, beta_ptr, nll_ptr, weights_ptr, den_ptr, 1, n, t, u, T, U1, valid
    )
    # float64 scalars rounded once to the accumulation dtype, as the C++ kernels' static_cast (the
    # interpreter passes Python floats as float32 constants instead)
    clamp = tl.cast(clamp, den.dtype)
    fastemit_lambda = tl.cast(fastemit_lambda, den.dtype)
    occupancy, blank_flow, label_flow = rnnt_cell_flows(lp_ptr, beta_ptr, c, a, beta, t, u, T_n, U_n, U1, valid)
    has_label = valid & (u < U_n)
    label = tl.where(has_label, tl.load(tgt_ptr + n * U + u, mask=has_label, other=0), -1)
    store_token_grads(
        x_ptr,
        g_ptr,
        rows,
        valid,
        in_grid,
        W,
        V,
        W,
        blank,
        label,
        den,
        occupancy + fastemit_lambda * label_flow,
        blank_flow,
        (1.0 + fastemit_lambda) * label_flow,
        clamp,
        weight,
        BLOCK_V,
    )


@triton.jit
def tdt_logits_grad_kernel(
    x_ptr,
    den_ptr,
    lp_ptr,
    alpha_ptr,
    beta_ptr,
    nll_ptr,
    tgt_ptr,
    T_len_ptr,
    U_len_ptr,
    dur_ptr,
    weights_ptr,
    g_ptr,
    Tc,
    T,
    U1,
    U,
    W,
    V,
    D,
    blank,
    t_offset,
    clamp: tl.float64,
    BLOCK_R: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """grad (N, Tc, U1, V + D): token scores weights[n] * clamp(d nll / d x), duration scores weights[n] * d nll /
    d x (not clamped, as NeMo's TDT loss)."""
    S = 2 + D
    rows, n, t, u, T_n, U_n, in_grid, valid = row_coordinates(Tc, U1, t_offset, T_len_ptr, U_len_ptr, BLOCK_R)
    c, a, beta, den, weight = cell_statistics(
        alpha_ptr, beta_ptr, nll_ptr, weights_ptr, den_ptr, 2, n, t, u, T, U1, valid
    )
    clamp = tl.cast(clamp, den.dtype)  # rounded once, as the C++ kernels' static_cast
    blank_lp = tl.load(lp_ptr + S * c, mask=valid, other=0.0)
    label_lp = tl.load(lp_ptr + S * c + 1, mask=valid, other=0.0)
    occupancy = tl.exp(a + beta)
    # (BLOCK_R, BLOCK_D) the flows through each duration's blank and label arc
    i = tl.arange(0, BLOCK_D)
    d = tl.load(dur_ptr + i, mask=i < D, other=0)[None, :]
    cells = valid[:, None] & (i < D)[None, :]
    q = tl.load(lp_ptr + S * c[:, None] + 2 + i[None, :], mask=cells, other=0.0)
    inside = cells & (t + d < T_n)
    to_blank = inside & (d >= 1)
    beta_blank = tl.load(beta_ptr + c[:, None] + d * U1, mask=to_blank, other=0.0)
    ends = cells & (t + d == T_n) & (u == U_n)[:, None] & (d >= 1)
    blank_arc = a[:, None] + blank_lp[:, None] + q
    blank_flows = tl.where(to_blank, tl.exp(blank_arc + beta_blank), tl.where(ends, tl.exp(blank_arc), 0.0))
    to_label = inside & (u < U_n)[:, None]
    beta_label = tl.load(beta_ptr + c[:, None] + d * U1 + 1, mask=to_label, other=0.0)
    label_flows = tl.where(to_label, tl.exp(a[:, None] + label_lp[:, None] + q + beta_label), 0.0)
    has_label = valid & (u < U_n)
    label = tl.where(has_label, tl.load(tgt_ptr + n * U + u, mask=has_label, other=0), -1)
    store_token_grads(
        x_ptr,
        g_ptr,
        rows,
        valid,
        in_grid,
        W,
        V,
        V,
        blank,
        label,
        den,
        occupancy,
        tl.sum(blank_flows, axis=1),
        tl.sum(label_flows, axis=1),
        clamp,
        weight,
        BLOCK_V,
    )
    duration_den = tl.load(den_ptr + 2 * c + 1, mask=valid, other=0.0)
    offsets = rows[:, None] * W + V + i[None, :]
    x = tl.load(x_ptr + offsets, mask=cells, other=0.0).to(duration_den.dtype)
    softmax = tl.exp(x - duration_den[:, None])
    g = (softmax * occupancy[:, None] - blank_flows - label_flows) * weight
    store = in_grid[:, None] & (i < D)[None, :]
    tl.store(g_ptr + offsets, tl.where(cells, g, 0.0).to(g_ptr.dtype.element_ty), mask=store)
