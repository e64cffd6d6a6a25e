"""Conformer encoder: convolutional subsampling followed by Conformer blocks.

Two block types share the subsampling, the length handling and the padding masks:

- ``attention="mha"``: torchaudio's Conformer blocks (plain multi-head attention, no positional
  encoding), the original small demo model;
- ``attention="rel_pos"``: relative-position self-attention in NeMo's block layout
  (`asr_plugin.models.conformer_block`), used by the NeMo-sized presets and by the NeMo importer.

The rel_pos blocks also take NeMo's cache-aware streaming options: limited attention contexts
(`asr_plugin.models.context`), a causal depthwise convolution, LayerNorm as its norm and causal subsampling.
A model with them trains on the whole utterance under the context's mask and decodes chunk by chunk with
caches (`streaming_setup`, `initial_state`, `step`; `asr_plugin.models.streaming`, docs/streaming.md).
"""

from __future__ import annotations

import math

import torch
import torchaudio
from torch import nn

from asr_plugin.models import streaming
from asr_plugin.models.attention import relative_sinusoids
from asr_plugin.models.conformer_block import RelPosConformerBlock, conv_context
from asr_plugin.models.context import FULL_CONTEXT, blocked_attention, context_probs, context_sizes
from asr_plugin.models.subsampling import Conv2dSubsampling

ATTENTION_TYPES = ("mha", "rel_pos")
# subsampling name -> (convolution padding, depthwise, default channels; None = d_model)
SUBSAMPLING_TYPES: dict[str, tuple[int, bool, int | None]] = {
    "conv2d": (0, False, 64),
    "striding": (1, False, None),
    "dw_striding": (1, True, 256),
}


def _masked_convolution(conv_module: nn.Module, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """torchaudio's convolution module with padded frames zeroed before the depthwise convolution.

    (B, T, D) -> (B, T, D); keep: (B, 1, T) bool, True on valid frames.
    """
    x = conv_module.layer_norm(x).transpose(1, 2)  # (B, D, T)
    pointwise_glu, rest = conv_module.sequential[:2], conv_module.sequential[2:]
    x = pointwise_glu(x).masked_fill(~keep, 0.0)
    return rest(x).transpose(1, 2)


def _conformer_layer(layer: nn.Module, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    """One torchaudio ConformerLayer (convolution after attention) on (T, B, D), padding kept out of the convolution."""
    x = x + 0.5 * layer.ffn1(x)
    attn_in = layer.self_attn_layer_norm(x)
    attn, _ = layer.self_attn(attn_in, attn_in, attn_in, key_padding_mask=padding_mask, need_weights=False)
    x = x + layer.self_attn_dropout(attn)
    keep = ~padding_mask.unsqueeze(1)  # (B, 1, T)
    x = x + _masked_convolution(layer.conv_module, x.transpose(0, 1), keep).transpose(0, 1)
    x = x + 0.5 * layer.ffn2(x)
    return layer.final_layer_norm(x)


class ConformerEncoder(nn.Module):
    """Log-mel features -> encoder frames.

    With ``attention="mha"`` it uses torchaudio's Conformer blocks and their parameters but runs each
    block's forward here: torchaudio's convolution module does not mask padding, so a batch's padded
    frames leaked into its shorter utterances through the depthwise convolution. With
    ``attention="rel_pos"`` the blocks are `RelPosConformerBlock` (NeMo's ``self_attention_model: rel_pos``).
    Either way padded frames receive no attention and are zeroed before every convolution, so an
    utterance's output does not depend on what else is in the batch.

    Args:
        input_dim: F, feature bins (80).
        d_model: D, model dimension (also the output dimension).
        num_layers, num_heads, ffn_dim, conv_kernel_size: Conformer block sizes.
        dropout: dropout inside the Conformer blocks.
        subsampling_factor: time reduction of the front-end (4 -> 40 ms frames, 8 -> 80 ms).
        attention: "mha" or "rel_pos" (see the module docstring).
        subsampling: "conv2d" (unpadded convolutions, 64 channels), "striding" (NeMo's Conformer:
            padded, d_model channels) or "dw_striding" (NeMo's FastConformer: depthwise-separable, 256 channels).
        subsampling_channels: overrides the subsampling's default channel count.
        xscaling: multiply the subsampled frames by sqrt(d_model) (NeMo's ``xscaling``).
        bias: biases in the rel_pos blocks' linear and convolution layers (NeMo's ``use_bias``);
            torchaudio's blocks always have them.

    Streaming options (NeMo's names and meanings; rel_pos only; the defaults are the full-context model):
        att_context_size: None (full context), ``[left, right]`` or a list of them (a multi-lookahead model;
            the first is `att_context_size`, the default of `forward` and of streaming); -1 is unlimited.
        att_context_probs: the training probability of each context (None: uniform; `draw_context`).
        att_context_style: "regular" or "chunked_limited" (`asr_plugin.models.context`).
        conv_context_size: None (centred), "causal", or [left, right] frames of the depthwise convolution.
        conv_norm_type: "batch_norm" or "layer_norm" after the depthwise convolution.
        causal_downsampling: causal stride-2 convolutions in the subsampling (striding or dw_striding).
    """

    def __init__(
        self,
        input_dim: int = 80,
        d_model: int = 144,
        num_layers: int = 4,
        num_heads: int = 4,
        ffn_dim: int = 576,
        conv_kernel_size: int = 31,
        dropout: float = 0.1,
        subsampling_factor: int = 4,
        attention: str = "mha",
        subsampling: str = "conv2d",
        subsampling_channels: int | None = None,
        xscaling: bool = False,
        bias: bool = True,
        att_context_size: list | None = None,
        att_context_probs: list[float] | None = None,
        att_context_style: str = "regular",
        conv_context_size: str | list[int] | None = None,
        conv_norm_type: str = "batch_norm",
        causal_downsampling: bool = False,
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        if attention not in ATTENTION_TYPES:
            raise ValueError(f"attention={attention!r}; choose one of {ATTENTION_TYPES}")
        if subsampling not in SUBSAMPLING_TYPES:
            raise ValueError(f"subsampling={subsampling!r}; choose one of {tuple(SUBSAMPLING_TYPES)}")
        if attention == "mha" and not bias:
            raise ValueError("bias=False needs attention='rel_pos' (torchaudio's blocks always have biases)")
        self.att_context_sizes = context_sizes(att_context_size, att_context_style)
        self.att_context_probs = context_probs(att_context_probs, len(self.att_context_sizes))
        self.att_context_style = att_context_style
        self.att_context_size = self.att_context_sizes[0]
        if attention == "mha":
            _refuse_streaming_options_for_mha(
                att_context_size=self.att_context_sizes != [FULL_CONTEXT],
                att_context_probs=att_context_probs is not None,
                att_context_style=att_context_style != "regular",
                conv_context_size=conv_context_size is not None,
                conv_norm_type=conv_norm_type != "batch_norm",
                causal_downsampling=causal_downsampling,
            )
        if causal_downsampling and subsampling == "conv2d":
            raise ValueError("causal_downsampling needs subsampling='striding' or 'dw_striding' (NeMo's layouts)")
        padding, depthwise, channels = SUBSAMPLING_TYPES[subsampling]
        self.input_dim = input_dim
        self.output_dim = d_model
        self.attention = attention
        self.xscale = math.sqrt(d_model) if xscaling else None
        self.subsampling = Conv2dSubsampling(
            input_dim,
            d_model,
            factor=subsampling_factor,
            channels=subsampling_channels or channels or d_model,
            padding=padding,
            depthwise=depthwise,
            causal=causal_downsampling,
        )
        if attention == "mha":
            self.conformer = torchaudio.models.Conformer(
                input_dim=d_model,
                num_heads=num_heads,
                ffn_dim=ffn_dim,
                num_layers=num_layers,
                depthwise_conv_kernel_size=conv_kernel_size,
                dropout=dropout,
            )
        else:
            self.conv_context = conv_context(conv_context_size, conv_kernel_size)
            self.layers = nn.ModuleList(
                RelPosConformerBlock(
                    d_model, num_heads, ffn_dim, conv_kernel_size, dropout, bias, self.conv_context, conv_norm_type
                )
                for _ in range(num_layers)
            )

    @property
    def blocks(self) -> nn.ModuleList:
        """The Conformer blocks, bottom first (what fine-tuning freezes block by block)."""
        return self.conformer.conformer_layers if self.attention == "mha" else self.layers

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Exact encoder frames for (B,) feature lengths."""
        return self.subsampling.output_lengths(lengths)

    def set_default_att_context_size(self, att_context_size: list[int] | tuple[int, int]) -> None:
        """Makes `att_context_size` (one of the model's contexts) the default of `forward` and of streaming
        (NeMo's method of the same name; validation, test and decoding use the default)."""
        self.att_context_size = self.checked_context(att_context_size)

    @property
    def streaming_contexts(self) -> list[tuple[int, int]]:
        """The attention contexts with a limited right context, in the model's order: those it can stream with
        caches (a full-context one, ``[-1, -1]``, decodes offline or by buffered streaming)."""
        return [tuple(context) for context in self.att_context_sizes if context[1] >= 0]

    def checked_context(self, att_context_size: list[int] | tuple[int, int] | None) -> tuple[int, int]:
        """`att_context_size` as a (left, right) pair the model was trained with; None: the default."""
        if att_context_size is None:
            return self.att_context_size
        context = tuple(att_context_size)
        if context not in self.att_context_sizes:
            raise ValueError(
                f"att_context_size={list(context)} is not one of this model's contexts "
                f"{[list(size) for size in self.att_context_sizes]} (model.att_context_size)"
            )
        return context

    def forward(
        self,
        features: torch.Tensor,
        lengths: torch.Tensor,
        att_context_size: list[int] | tuple[int, int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F) float features, (B,) int64 lengths -> (B, T', D) frames, (B,) int64 lengths.

        `att_context_size`: the attention context, one of the model's (None: the default, `att_context_size`).
        Raises ValueError when an utterance is too short to leave one frame after subsampling.
        """
        if not len(lengths):
            return self.encode_padded(features, lengths, att_context_size)
        # one host read for both (a device-to-host sync per step on a GPU)
        shortest, longest = torch.stack((lengths.min(), lengths.max())).tolist()
        if shortest < self.subsampling.min_input_length():
            index = int((lengths < self.subsampling.min_input_length()).nonzero()[0])
            raise ValueError(
                f"utterance {index} has {int(lengths[index])} feature frames; the encoder needs at least "
                f"{self.subsampling.min_input_length()} to produce one output frame"
            )
        features = features[:, :longest]  # so that T' == max(output lengths)
        return self.encode_padded(features, lengths, att_context_size)

    def encode_padded(
        self,
        features: torch.Tensor,
        lengths: torch.Tensor,
        att_context_size: list[int] | tuple[int, int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward` without its two data-dependent steps (length check, trim to max(lengths)), which
        `torch.export` cannot trace. (B, T, F), (B,) -> (B, T', D), (B,)."""
        context = self.checked_context(att_context_size)
        x, out_lengths = self.subsampling(features, lengths)  # (B, T', D)
        if self.xscale is not None:
            x = x * self.xscale
        padding_mask = torch.arange(x.shape[1], device=x.device) >= out_lengths.unsqueeze(1)  # (B, T')
        if self.attention == "mha":
            x = x.transpose(0, 1)  # (T', B, D)
            for layer in self.conformer.conformer_layers:
                x = _conformer_layer(layer, x, padding_mask)
            return x.transpose(0, 1), out_lengths
        pos_emb = relative_sinusoids(x.shape[1], x.shape[2], x.device).to(x.dtype)  # (2T'-1, D)
        attention_mask = None  # full context: only the padding is masked
        if context != FULL_CONTEXT:
            attention_mask = blocked_attention(context, self.att_context_style, ~padding_mask, ~padding_mask)
        for layer in self.layers:
            x = layer(x, pos_emb, padding_mask, attention_mask)
        return x, out_lengths

    # ---------------------------------------------------------------- cache-aware streaming

    def streaming_setup(
        self, att_context_size: list[int] | tuple[int, int] | None = None, max_context: int = 10000
    ) -> streaming.StreamingSetup:
        """The chunk sizes and cache sizes of streaming with `att_context_size` (None: the default);
        `max_context`: the attention cache of an unlimited left context. See `asr_plugin.models.streaming`."""
        return streaming.streaming_setup(self, att_context_size, max_context)

    def initial_state(
        self,
        batch_size: int,
        setup: streaming.StreamingSetup,
        device: torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> streaming.StreamState:
        """The state of `batch_size` streams that have seen nothing (zeros; NeMo's ``get_initial_cache_state``)."""
        return streaming.initial_state(self, batch_size, setup, device, dtype)

    def step(
        self,
        features: torch.Tensor,
        lengths: torch.Tensor,
        state: streaming.StreamState,
        setup: streaming.StreamingSetup,
        final: torch.Tensor | bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, streaming.StreamState]:
        """One cache-aware streaming step: (B, T, F) features, (B,) lengths, state -> (B, T_out, D) frames,
        (B,) frame counts, the next state. See `asr_plugin.models.streaming.step`."""
        return streaming.step(self, features, lengths, state, setup, final)


def _refuse_streaming_options_for_mha(**given: bool) -> None:
    """ValueError naming the streaming options set on a torchaudio (attention="mha") encoder."""
    named = [name for name, is_set in given.items() if is_set]
    if named:
        raise ValueError(
            f"{', '.join(named)}: streaming options need attention='rel_pos' (the torchaudio 'mha' blocks do "
            "not stream)"
        )
