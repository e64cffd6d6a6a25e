"""The flash joint's kernels: the RNN-T loss of the standard joint ``output(act(enc_proj + pred_proj))`` without
its (T, U+1, V) logits ever existing.

Each program takes BLOCK_U label positions of one frame of one sample. Forward: the logits of those cells are
formed tile by tile, (BLOCK_U, BLOCK_K) activations times (BLOCK_K, BLOCK_V) of W_out^T with ``tl.dot``, and
folded into an online log-sum-exp; only the blank and label log-probs and the denominator are stored, in the
layout of the ``transducer_log_probs`` op (so the recursions are the backend's own). Backward recomputes every
tile, forms the logits gradient in registers (``grads``' formula) and adds its products into the gradients of
W_out (g^T h), of the bias (sum of g), and of the projections (g W_out times act', summed over u for the
encoder side and over t for the predictor side) with atomic adds. Activations: tanh and relu (their derivative
from the output); float32 arithmetic throughout (``input_precision="ieee"``: no TF32).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .grads import cell_statistics, rnnt_cell_flows
from .lattice_math import clamp_and_weight, online_lse_update
from .rows import row_coordinates, store_rnnt_log_probs

ACTIVATIONS = ("tanh", "relu")


@triton.jit
def activation(pre, ACT: tl.constexpr):
    if ACT == "tanh":
        e = tl.exp(-2.0 * tl.abs(pre))
        magnitude = (1.0 - e) / (1.0 + e)
        return tl.where(pre < 0, -magnitude, magnitude)
    return tl.maximum(pre, 0.0)


@triton.jit
def activation_derivative(hidden, ACT: tl.constexpr):
    """act'(pre) from hidden = act(pre)."""
    if ACT == "tanh":
        return 1.0 - hidden * hidden
    return tl.where(hidden > 0, 1.0, 0.0)


@triton.jit
def hidden_tile(enc_ptr, pred_ptr, n, t, u, T, U1, H, k0, rows_ok, ACT: tl.constexpr, BLOCK_K: tl.constexpr):
    """act(enc_proj[n, t, k] + pred_proj[n, u, k]) (BLOCK_U, BLOCK_K) float32, columns k0.. (zeros past H)."""
    k = k0 + tl.arange(0, BLOCK_K)
    k_ok = k < H
    enc = tl.load(enc_ptr + (n * T + t) * H + k, mask=k_ok, other=0.0).to(tl.float32)
    pred_rows = (n * U1 + u) * H
    pred = tl.load(pred_ptr + pred_rows[:, None] + k[None, :], mask=rows_ok[:, None] & k_ok[None, :], other=0.0)
    hidden = activation(enc[None, :] + pred.to(tl.float32), ACT)
    return tl.where(rows_ok[:, None] & k_ok[None, :], hidden, 0.0)


@triton.jit
def logits_tile(
    enc_ptr,
    pred_ptr,
    w_ptr,
    b_ptr,
    n,
    t,
    u,
    T,
    U1,
    H,
    V,
    v0,
    rows_ok,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    BLOCK_U: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Logits (BLOCK_U, BLOCK_V) float32 of columns v0.. (-inf past V)."""
    v = v0 + tl.arange(0, BLOCK_V)
    v_ok = v < V
    acc = tl.zeros((BLOCK_U, BLOCK_V), tl.float32)
    for k0 in range(0, H, BLOCK_K):
        hidden = hidden_tile(enc_ptr, pred_ptr, n, t, u, T, U1, H, k0, rows_ok, ACT, BLOCK_K)
        k = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + v[:, None] * H + k[None, :], mask=v_ok[:, None] & (k < H)[None, :], other=0.0)
        acc += tl.dot(hidden, tl.trans(w.to(tl.float32)), input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + v, mask=v_ok, other=0.0).to(tl.float32)[None, :]
    return tl.where(v_ok[None, :], acc, -float("inf"))


@triton.jit
def flash_log_probs_kernel(
    enc_ptr,
    pred_ptr,
    w_ptr,
    b_ptr,
    tgt_ptr,
    T_len_ptr,
    U_len_ptr,
    lp_ptr,
    den_ptr,
    bad_ptr,
    T,
    U1,
    U,
    H,
    V,
    blank,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    BLOCK_U: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """enc_proj (N, T, H), pred_proj (N, U1, H), W_out (V, H), b (V,) -> log_probs (N, T, U1, 2) [blank, label]
    and denominators (N, T, U1) float32, as ``transducer_log_probs`` of the joint's logits."""
    rows, n, t, u, T_n, U_n, in_grid, valid = row_coordinates(T, U1, 0, T_len_ptr, U_len_ptr, BLOCK_U)
    has_label = valid & (u < U_n)
    label = tl.load(tgt_ptr + n * U + u, mask=has_label, other=-1)
    running_max = tl.full((BLOCK_U,), -float("inf"), tl.float32)
    running_sum = tl.zeros((BLOCK_U,), tl.float32)
    x_blank = tl.zeros((BLOCK_U,), tl.float32)
    x_label = tl.zeros((BLOCK_U,), tl.float32)
    for v0 in range(0, V, BLOCK_V):
        logits = logits_tile(
            enc_ptr, pred_ptr, w_ptr, b_ptr, n, t, u, T, U1, H, V, v0, valid, HAS_BIAS, ACT, BLOCK_U, BLOCK_V, BLOCK_K
        )
        running_max, running_sum = online_lse_update(running_max, running_sum, logits)
        v = v0 + tl.arange(0, BLOCK_V)
        x_blank += tl.sum(tl.where(v[None, :] == blank, logits, 0.0), axis=1)
        x_label += tl.sum(tl.where(v[None, :] == label[:, None], logits, 0.0), axis=1)
    den = tl.where(running_max == -float("inf"), 0.0, running_max) + tl.log(running_sum)
    blank_lp = x_blank - den
    label_lp = tl.where(has_label, x_label - den, -float("inf"))
    store_rnnt_log_probs(lp_ptr, den_ptr, bad_ptr, rows, n, in_grid, valid, den, blank_lp, label_lp)


@triton.jit
def flash_grads_kernel(
    enc_ptr,
    pred_ptr,
    w_ptr,
    b_ptr,
    tgt_ptr,
    T_len_ptr,
    U_len_ptr,
    lp_ptr,
    den_ptr,
    alpha_ptr,
    beta_ptr,
    nll_ptr,
    weights_ptr,
    d_enc_ptr,
    d_pred_ptr,
    d_w_ptr,
    d_b_ptr,
    T,
    U1,
    U,
    H,
    V,
    blank,
    clamp: tl.float64,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    BLOCK_U: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Adds weights[n] * d nll[n] / d (enc_proj, pred_proj, W_out, b) into the float32 gradient buffers (zeroed by
    the caller), the logits gradient clamped as ``transducer_logits_grad``'s."""
    rows, n, t, u, T_n, U_n, in_grid, valid = row_coordinates(T, U1, 0, T_len_ptr, U_len_ptr, BLOCK_U)
    c, a, beta, den, weight = cell_statistics(
        alpha_ptr, beta_ptr, nll_ptr, weights_ptr, den_ptr, 1, n, t, u, T, U1, valid
    )
    clamp = tl.cast(clamp, tl.float32)
    occupancy, blank_flow, label_flow = rnnt_cell_flows(lp_ptr, beta_ptr, c, a, beta, t, u, T_n, U_n, U1, valid)
    has_label = valid & (u < U_n)
    label = tl.load(tgt_ptr + n * U + u, mask=has_label, other=-1)
    for v0 in range(0, V, BLOCK_V):
        v = v0 + tl.arange(0, BLOCK_V)
        v_ok = v < V
        logits = logits_tile(
            enc_ptr, pred_ptr, w_ptr, b_ptr, n, t, u, T, U1, H, V, v0, valid, HAS_BIAS, ACT, BLOCK_U, BLOCK_V, BLOCK_K
        )
        g = tl.exp(logits - den[:, None]) * occupancy[:, None]
        g -= tl.where(v[None, :] == blank, blank_flow[:, None], 0.0)
        g -= tl.where(v[None, :] == label[:, None], label_flow[:, None], 0.0)
        g = tl.where(valid[:, None] & v_ok[None, :], clamp_and_weight(g, clamp, weight), 0.0)  # (BLOCK_U, BLOCK_V)
        if HAS_BIAS:
            tl.atomic_add(d_b_ptr + v, tl.sum(g, axis=0), mask=v_ok)
        for k0 in range(0, H, BLOCK_K):
            k = k0 + tl.arange(0, BLOCK_K)
            k_ok = k < H
            hidden = hidden_tile(enc_ptr, pred_ptr, n, t, u, T, U1, H, k0, valid, ACT, BLOCK_K)
            w_tile = v_ok[:, None] & k_ok[None, :]
            tl.atomic_add(
                d_w_ptr + v[:, None] * H + k[None, :], tl.dot(tl.trans(g), hidden, input_precision="ieee"), mask=w_tile
            )
            w = tl.load(w_ptr + v[:, None] * H + k[None, :], mask=w_tile, other=0.0).to(tl.float32)
            # d pre-activation of this V tile's contribution (linear in g, so the tiles' sum is the whole)
            d_pre = tl.dot(g, w, input_precision="ieee") * activation_derivative(hidden, ACT)
            tl.atomic_add(d_enc_ptr + (n * T + t) * H + k, tl.sum(d_pre, axis=0), mask=k_ok)
            pred_rows = (n * U1 + u) * H
            tl.atomic_add(d_pred_ptr + pred_rows[:, None] + k[None, :], d_pre, mask=valid[:, None] & k_ok[None, :])
