"""Conformer encoder: convolutional subsampling followed by Conformer blocks.

Two block types share the subsampling, the length handling and the padding masks:

- ``attention="mha"``: torchaudio's Conformer blocks (plain multi-head attention, no positional
  encoding), the original small demo model;
- ``attention="rel_pos"``: relative-position self-attention in NeMo's block layout
  (`asr_plugin.models.conformer_block`), used by the NeMo-sized presets and by the NeMo importer.
"""

from __future__ import annotations

import math

import torch
import torchaudio
from torch import nn

from asr_plugin.models.attention import relative_sinusoids
from asr_plugin.models.conformer_block import RelPosConformerBlock
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
        padding, depthwise, channels = SUBSAMPLING_TYPES[subsampling]
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
            self.layers = nn.ModuleList(
                RelPosConformerBlock(d_model, num_heads, ffn_dim, conv_kernel_size, dropout, bias)
                for _ in range(num_layers)
            )

    @property
    def blocks(self) -> nn.ModuleList:
        """The Conformer blocks, bottom first (what fine-tuning freezes block by block)."""
        return self.conformer.conformer_layers if self.attention == "mha" else self.layers

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Exact encoder frames for (B,) feature lengths."""
        return self.subsampling.output_lengths(lengths)

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F) float features, (B,) int64 lengths -> (B, T', D) frames, (B,) int64 lengths.

        Raises ValueError when an utterance is too short to leave one frame after subsampling.
        """
        if not len(lengths):
            return self.encode_padded(features, lengths)
        # one host read for both (a device-to-host sync per step on a GPU)
        shortest, longest = torch.stack((lengths.min(), lengths.max())).tolist()
        if shortest < self.subsampling.min_input_length():
            index = int((lengths < self.subsampling.min_input_length()).nonzero()[0])
            raise ValueError(
                f"utterance {index} has {int(lengths[index])} feature frames; the encoder needs at least "
                f"{self.subsampling.min_input_length()} to produce one output frame"
            )
        features = features[:, :longest]  # so that T' == max(output lengths)
        return self.encode_padded(features, lengths)

    def encode_padded(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward` without its two data-dependent steps (length check, trim to max(lengths)), which
        `torch.export` cannot trace. (B, T, F), (B,) -> (B, T', D), (B,)."""
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
        for layer in self.layers:
            x = layer(x, pos_emb, padding_mask)
        return x, out_lengths
