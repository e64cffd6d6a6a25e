"""Conformer block with relative-position self-attention, laid out as NeMo's ``ConformerLayer``.

Order (Gulati et al. 2020, macaron style): x + FF1/2 -> x + MHSA -> x + Conv -> x + FF2/2 -> LayerNorm,
each sub-module pre-normalised. Sub-module names follow NeMo's so that its checkpoints map one to one.
"""

from __future__ import annotations

import torch
from torch import nn

from asr_plugin.models.attention import RelPositionMultiHeadAttention


class FeedForward(nn.Module):
    """Linear -> Swish -> dropout -> Linear; (..., D) -> (..., D)."""

    def __init__(self, d_model: int, ffn_dim: int, dropout: float, bias: bool = True) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, ffn_dim, bias=bias)
        self.activation = nn.SiLU()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(ffn_dim, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class ConvolutionModule(nn.Module):
    """Pointwise conv (2D) -> GLU -> depthwise conv -> BatchNorm -> Swish -> pointwise conv; (B, T, D) -> (B, T, D).

    Padded frames are zeroed before the depthwise convolution, so they never leak into valid frames.

    Args:
        d_model: D.
        kernel_size: odd depthwise kernel width (centred, "same" padding).
        bias: biases of the three convolutions.
    """

    def __init__(self, d_model: int, kernel_size: int, bias: bool = True) -> None:
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"conv_kernel_size={kernel_size} must be odd (centred depthwise convolution)")
        self.pointwise_conv1 = nn.Conv1d(d_model, 2 * d_model, kernel_size=1, bias=bias)
        self.depthwise_conv = nn.Conv1d(
            d_model, d_model, kernel_size, padding=(kernel_size - 1) // 2, groups=d_model, bias=bias
        )
        self.batch_norm = nn.BatchNorm1d(d_model)
        self.activation = nn.SiLU()
        self.pointwise_conv2 = nn.Conv1d(d_model, d_model, kernel_size=1, bias=bias)

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D), (B, T) bool True on padding -> (B, T, D)."""
        x = nn.functional.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)  # (B, D, T)
        x = x.masked_fill(padding_mask.unsqueeze(1), 0.0)
        x = self.activation(self.batch_norm(self.depthwise_conv(x)))
        return self.pointwise_conv2(x).transpose(1, 2)


class RelPosConformerBlock(nn.Module):
    """One Conformer block; (B, T, D) -> (B, T, D).

    Args:
        d_model, num_heads, ffn_dim, conv_kernel_size: sizes.
        dropout: on each residual branch, inside the feed-forwards and on the attention weights.
        bias: biases of the linear and convolution layers (NeMo's ``use_bias``).
    """

    def __init__(
        self, d_model: int, num_heads: int, ffn_dim: int, conv_kernel_size: int, dropout: float, bias: bool = True
    ) -> None:
        super().__init__()
        self.norm_feed_forward1 = nn.LayerNorm(d_model)
        self.feed_forward1 = FeedForward(d_model, ffn_dim, dropout, bias)
        self.norm_self_att = nn.LayerNorm(d_model)
        self.self_attn = RelPositionMultiHeadAttention(d_model, num_heads, dropout, bias)
        self.norm_conv = nn.LayerNorm(d_model)
        self.conv = ConvolutionModule(d_model, conv_kernel_size, bias)
        self.norm_feed_forward2 = nn.LayerNorm(d_model)
        self.feed_forward2 = FeedForward(d_model, ffn_dim, dropout, bias)
        self.norm_out = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pos_emb: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D) frames, (2T - 1, D) relative sinusoids, (B, T) bool True on padding -> (B, T, D)."""
        x = x + 0.5 * self.dropout(self.feed_forward1(self.norm_feed_forward1(x)))
        x = x + self.dropout(self.self_attn(self.norm_self_att(x), pos_emb, padding_mask))
        x = x + self.dropout(self.conv(self.norm_conv(x), padding_mask))
        x = x + 0.5 * self.dropout(self.feed_forward2(self.norm_feed_forward2(x)))
        return self.norm_out(x)
