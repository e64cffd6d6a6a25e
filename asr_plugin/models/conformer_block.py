"""Conformer block with relative-position self-attention, laid out as NeMo's ``ConformerLayer``.

Order (Gulati et al. 2020, macaron style): x + FF1/2 -> x + MHSA -> x + Conv -> x + FF2/2 -> LayerNorm,
each sub-module pre-normalised. Sub-module names follow NeMo's so that its checkpoints map one to one.
"""

from __future__ import annotations

import torch
from torch import nn

from asr_plugin.models.attention import RelPositionMultiHeadAttention
from asr_plugin.models.history import append_history


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


CONV_NORM_TYPES = ("batch_norm", "layer_norm")


def conv_context(conv_context_size: object, kernel_size: int) -> tuple[int, int]:
    """NeMo's ``conv_context_size`` as the depthwise convolution's (left, right) frames: None is centred
    (``(K - 1) // 2`` each side), ``"causal"`` is ``(K - 1, 0)``, or ``[left, right]`` with left + right + 1 = K."""
    if conv_context_size is None:
        if kernel_size % 2 == 0:
            raise ValueError(f"conv_kernel_size={kernel_size} must be odd (centred depthwise convolution)")
        return (kernel_size - 1) // 2, (kernel_size - 1) // 2
    if conv_context_size == "causal":
        return kernel_size - 1, 0
    if (
        isinstance(conv_context_size, (list, tuple))
        and len(conv_context_size) == 2
        and all(isinstance(side, int) and side >= 0 for side in conv_context_size)
        and sum(conv_context_size) + 1 == kernel_size
    ):
        return int(conv_context_size[0]), int(conv_context_size[1])
    raise ValueError(
        f"conv_context_size={conv_context_size!r}: use null (centred), 'causal', or [left, right] with "
        f"left + right + 1 = conv_kernel_size ({kernel_size})"
    )


class ConvolutionModule(nn.Module):
    """Pointwise conv (2D) -> GLU -> depthwise conv -> norm -> Swish -> pointwise conv; (B, T, D) -> (B, T, D).

    Padded frames are zeroed before the depthwise convolution, so they never leak into valid frames.

    Args:
        d_model: D.
        kernel_size: K, the depthwise kernel width.
        bias: biases of the three convolutions.
        context: (left, right) frames the depthwise convolution sees (`conv_context`); None: centred.
            (K - 1, 0) is causal: a streaming step then needs only the K - 1 frames before its chunk.
        norm_type: "batch_norm" or "layer_norm" over the channels of each frame (NeMo's ``conv_norm_type``;
            the module keeps NeMo's name ``batch_norm`` either way, so checkpoints map one to one).
    """

    def __init__(
        self,
        d_model: int,
        kernel_size: int,
        bias: bool = True,
        context: tuple[int, int] | None = None,
        norm_type: str = "batch_norm",
    ) -> None:
        super().__init__()
        if norm_type not in CONV_NORM_TYPES:
            raise ValueError(f"conv_norm_type={norm_type!r}; choose one of {CONV_NORM_TYPES}")
        self.context = conv_context(None, kernel_size) if context is None else context
        centred = self.context[0] == self.context[1]
        self.pointwise_conv1 = nn.Conv1d(d_model, 2 * d_model, kernel_size=1, bias=bias)
        # A centred convolution pads inside Conv1d (as before contexts existed); any other pads in `forward`.
        self.depthwise_conv = nn.Conv1d(
            d_model, d_model, kernel_size, padding=self.context[0] if centred else 0, groups=d_model, bias=bias
        )
        self.norm_type = norm_type
        self.batch_norm = nn.BatchNorm1d(d_model) if norm_type == "batch_norm" else nn.LayerNorm(d_model)
        self.activation = nn.SiLU()
        self.pointwise_conv2 = nn.Conv1d(d_model, d_model, kernel_size=1, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        padding_mask: torch.Tensor,
        history: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D), (B, T) bool True on padding -> (B, T, D).

        With `history` (B, D, left): the depthwise convolution's inputs of the frames before `x` (a streaming
        step's ``cache_last_time``); returns ((B, T, D), the history after the first ``keep[b]`` frames of each row).
        """
        x = nn.functional.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)  # (B, D, T)
        x = x.masked_fill(padding_mask.unsqueeze(1), 0.0)
        left, right = self.context
        conv = self.depthwise_conv
        if history is not None:
            new_history = append_history(history, x, keep, dim=2)
            x = nn.functional.pad(torch.cat([history, x], dim=2), (0, right))  # (B, D, left + T + right)
            x = nn.functional.conv1d(x, conv.weight, conv.bias, groups=conv.groups)  # unpadded: (B, D, T)
        else:
            x = conv(x if conv.padding[0] else nn.functional.pad(x, (left, right)))
        if self.norm_type == "layer_norm":
            x = self.batch_norm(x.transpose(1, 2)).transpose(1, 2)
        else:
            x = self.batch_norm(x)
        x = self.pointwise_conv2(self.activation(x)).transpose(1, 2)
        return x if history is None else (x, new_history)


class RelPosConformerBlock(nn.Module):
    """One Conformer block; (B, T, D) -> (B, T, D).

    Args:
        d_model, num_heads, ffn_dim, conv_kernel_size: sizes.
        dropout: on each residual branch, inside the feed-forwards and on the attention weights.
        bias: biases of the linear and convolution layers (NeMo's ``use_bias``).
        conv_context, conv_norm_type: the convolution module's ``context`` and ``norm_type``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_dim: int,
        conv_kernel_size: int,
        dropout: float,
        bias: bool = True,
        conv_context: tuple[int, int] | None = None,
        conv_norm_type: str = "batch_norm",
    ) -> None:
        super().__init__()
        self.norm_feed_forward1 = nn.LayerNorm(d_model)
        self.feed_forward1 = FeedForward(d_model, ffn_dim, dropout, bias)
        self.norm_self_att = nn.LayerNorm(d_model)
        self.self_attn = RelPositionMultiHeadAttention(d_model, num_heads, dropout, bias)
        self.norm_conv = nn.LayerNorm(d_model)
        self.conv = ConvolutionModule(d_model, conv_kernel_size, bias, conv_context, conv_norm_type)
        self.norm_feed_forward2 = nn.LayerNorm(d_model)
        self.feed_forward2 = FeedForward(d_model, ffn_dim, dropout, bias)
        self.norm_out = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        pos_emb: torch.Tensor,
        padding_mask: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, T, D) frames, (2T - 1, D) relative sinusoids, (B, T) bool True on padding -> (B, T, D).

        `attention_mask`: (B, T, T) bool, True where attention is blocked (a limited context); None: full
        context, only the padding is blocked.
        """
        x = self._half_feed_forward1(x)
        mask = padding_mask if attention_mask is None else attention_mask
        x = x + self.dropout(self.self_attn(self.norm_self_att(x), pos_emb, mask))
        x = x + self.dropout(self.conv(self.norm_conv(x), padding_mask))
        return self._finish(x)

    def step(
        self,
        x: torch.Tensor,
        pos_emb: torch.Tensor,
        padding_mask: torch.Tensor,
        attention_mask: torch.Tensor,
        channel_history: torch.Tensor,
        time_history: torch.Tensor,
        keep: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`forward` on a streaming chunk with the layer's caches (`asr_plugin.models.streaming`).

        Args:
            x: (B, T, D) the chunk's frames; padding_mask: (B, T) bool, True on padding.
            pos_emb: (2(C + T) - 1, D) `relative_sinusoids(C + T)`.
            attention_mask: (B, T, C + T) bool, True where attention is blocked.
            channel_history: (B, C, D) the attention inputs of the C frames before the chunk.
            time_history: (B, D, K - 1) the depthwise convolution's inputs of the frames before the chunk.
            keep: (B,) the chunk frames of each row that the caches take.
        Returns:
            (B, T, D) frames and the two histories after the first ``keep[b]`` frames of each row.
        """
        x = self._half_feed_forward1(x)
        attention_in = self.norm_self_att(x)
        x = x + self.dropout(self.self_attn(attention_in, pos_emb, attention_mask, history=channel_history))
        convolution, time_history = self.conv(self.norm_conv(x), padding_mask, time_history, keep)
        x = x + self.dropout(convolution)
        return self._finish(x), append_history(channel_history, attention_in, keep), time_history

    def _half_feed_forward1(self, x: torch.Tensor) -> torch.Tensor:
        """The first half feed-forward (macaron); (B, T, D) -> (B, T, D)."""
        return x + 0.5 * self.dropout(self.feed_forward1(self.norm_feed_forward1(x)))

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        """The second half feed-forward and the output norm; (B, T, D) -> (B, T, D)."""
        x = x + 0.5 * self.dropout(self.feed_forward2(self.norm_feed_forward2(x)))
        return self.norm_out(x)
