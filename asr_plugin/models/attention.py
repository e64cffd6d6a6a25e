"""Relative-position multi-head self-attention (Transformer-XL, Dai et al. 2019, section 3.3), as NeMo's ``rel_pos``.

Scores between query frame i and key frame j are

    (q_i + u) . k_j  +  (q_i + v) . W_pos r_{i-j}          (scaled by 1/sqrt(d_k))

with r a fixed sinusoid of the relative distance i - j, W_pos a bias-free projection shared by the
heads, and u, v learnt per-head biases ("pos_bias_u", "pos_bias_v"). The sinusoids are computed on the
fly for the distances a batch needs, so nothing positional is stored in the state dict and any length works.

In a cache-aware streaming step the keys are the layer's cached history (NeMo's ``cache_last_channel``: the
attention inputs of earlier frames) followed by the chunk, and the queries are the chunk's frames only.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def relative_sinusoids(length: int, dim: int, device: torch.device | None = None) -> torch.Tensor:
    """(2 * length - 1, dim) float32 sinusoids of the distances length-1, length-2, ..., -(length-1).

    Even channels hold sin(d * w_k), odd channels cos(d * w_k), with w_k = 10000^(-2k/dim).
    """
    distances = torch.arange(length - 1, -length, -1, dtype=torch.float32, device=device).unsqueeze(1)
    frequencies = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device) * -(math.log(10000.0) / dim))
    table = torch.zeros(2 * length - 1, dim, device=device)
    table[:, 0::2] = torch.sin(distances * frequencies)
    table[:, 1::2] = torch.cos(distances * frequencies)
    return table


def _distance_index(queries: int, keys: int, device: torch.device) -> torch.Tensor:
    """(Tq, Tk) int64: the row of `relative_sinusoids(Tk)` that holds the distance between query i and key j.

    The queries are the last Tq of the Tk key frames, so query i sits at key position Tk - Tq + i and the
    distance is d = Tk - Tq + i - j, held in row (Tk - 1) - d = (Tq - 1) - i + j.
    """
    return (queries - 1) - torch.arange(queries, device=device).unsqueeze(1) + torch.arange(keys, device=device)


class RelPositionMultiHeadAttention(nn.Module):
    """Self-attention with relative positions; (B, T, D) -> (B, T, D).

    Args:
        d_model: D.
        num_heads: H (D must be divisible by H).
        dropout: dropout on the attention weights.
        bias: biases of the query, key, value and output projections (the position projection has none).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.linear_q = nn.Linear(d_model, d_model, bias=bias)
        self.linear_k = nn.Linear(d_model, d_model, bias=bias)
        self.linear_v = nn.Linear(d_model, d_model, bias=bias)
        self.linear_out = nn.Linear(d_model, d_model, bias=bias)
        self.linear_pos = nn.Linear(d_model, d_model, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        self.pos_bias_v = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        self.dropout = dropout  # on the attention weights, applied inside scaled_dot_product_attention

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, H, d_k)."""
        return x.view(x.shape[0], x.shape[1], self.num_heads, self.head_dim)

    def forward(
        self, x: torch.Tensor, pos_emb: torch.Tensor, mask: torch.Tensor, history: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Args:
            x: (B, T, D) frames (the queries; with `history`, the last T keys).
            pos_emb: (2Tk - 1, D) `relative_sinusoids(Tk, D)`, Tk = T (+ C with `history`).
            mask: (B, Tk) bool, True on padded key frames (full context), or (B, T, Tk) bool, True where
                query i may not attend to key j (`asr_plugin.models.context.blocked_attention`). Every query
                row must keep at least one key. Outputs at padded query frames are computed but meaningless.
            history: (B, C, D) the attention inputs of the C frames before `x` (a streaming step's cache).
        Returns:
            (B, T, D).
        """
        keys_in = x if history is None else torch.cat([history, x], dim=1)  # (B, Tk, D)
        queries, keys = x.shape[1], keys_in.shape[1]
        q = self._heads(self.linear_q(x))  # (B, T, H, d_k)
        k = self._heads(self.linear_k(keys_in)).transpose(1, 2)  # (B, H, Tk, d_k)
        v = self._heads(self.linear_v(keys_in)).transpose(1, 2)  # (B, H, Tk, d_k)
        p = self.linear_pos(pos_emb).view(-1, self.num_heads, self.head_dim).transpose(0, 1)  # (H, 2Tk-1, d_k)
        by_distance = torch.matmul((q + self.pos_bias_v).transpose(1, 2), p.transpose(-2, -1))  # (B, H, T, 2Tk-1)
        index = _distance_index(queries, keys, x.device).expand(*by_distance.shape[:2], queries, keys)
        position = torch.gather(by_distance, -1, index)  # (B, H, T, Tk): entry (i, j) scores their distance
        blocked = mask[:, None, None, :] if mask.dim() == 2 else mask.unsqueeze(1)  # (B, 1, 1 or T, Tk)
        bias = (position / math.sqrt(self.head_dim)).masked_fill(blocked, float("-inf"))
        # softmax((q + u) k^T / sqrt(d_k) + bias) v, fused; every row keeps >= 1 key, so no row is all -inf
        # The float32 biases would promote bf16 activations under autocast; SDPA wants one dtype.
        out = nn.functional.scaled_dot_product_attention(
            (q + self.pos_bias_u).transpose(1, 2).to(v.dtype),
            k,
            v,
            attn_mask=bias.to(v.dtype),
            dropout_p=self.dropout if self.training else 0.0,
        )  # (B, H, T, d_k)
        out = out.transpose(1, 2).reshape(x.shape)  # (B, T, D)
        return self.linear_out(out)
