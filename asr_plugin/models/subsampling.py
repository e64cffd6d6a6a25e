"""Convolutional front-end that shortens log-mel frames before the Conformer."""

from __future__ import annotations

import torch
from torch import nn


def _time_mask(x: torch.Tensor, lengths: torch.Tensor, starts: torch.Tensor | None) -> torch.Tensor:
    """(B, C, T, F) with frames t >= lengths[b] (and t < starts[b]) set to zero."""
    steps = torch.arange(x.shape[2], device=x.device)
    keep = steps < lengths.unsqueeze(1)  # (B, T)
    if starts is not None:
        keep = keep & (steps >= starts.unsqueeze(1))
    return x * keep[:, None, :, None].to(x.dtype)


class CausalConv2d(nn.Conv2d):
    """NeMo's ``CausalConv2D``: a kernel-k, stride-s convolution padded k - 1 before and s - 1 after, in time and
    in frequency, so output frame t sees input frames up to s * t and none after."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        before, after = self.kernel_size[0] - 1, self.stride[0] - 1
        return super().forward(nn.functional.pad(x, (before, after, before, after)))


class Conv2dSubsampling(nn.Module):
    """Stack of stride-2 3x3 convolutions (x2 per layer, ReLU after each) followed by a linear projection.

    Three layouts, all with exact integer output lengths:

    - ``padding=0`` (the original front-end): a length L becomes ``(L - 1) // 2`` per layer.
    - ``padding=1``: NeMo's "striding" subsampling (Conformer); L becomes ``(L - 1) // 2 + 1``.
    - ``padding=1, depthwise=True``: NeMo's "dw_striding" (FastConformer): the first layer is a full
      convolution, each later one a depthwise 3x3 followed by a pointwise 1x1.

    ``causal=True`` (NeMo's ``causal_downsampling``, with ``padding=1``) pads each stride-2 convolution 2 frames
    before and 1 after (`CausalConv2d`) instead of 1 and 1: L becomes ``L // 2 + 1``, and output frame t of a
    factor-f stack sees input frames up to f * t, so a streaming step needs no feature frame after its chunk.

    Frames beyond each utterance's length are zeroed after every convolution, so padding added by
    batching never reaches valid frames (with ``padding=1`` it otherwise would). Channels are
    flattened channel-major (c * F' + f) into the projection, as NeMo does.

    Args:
        input_dim: F, feature bins per frame (80 log-mel bins).
        output_dim: D, the encoder's model dimension.
        factor: time reduction, a power of two; 4 gives 40 ms frames from 10 ms features.
        channels: convolution channels.
        padding: 0 or 1, the convolutions' padding in time and frequency.
        depthwise: depthwise-separable convolutions after the first layer.
        causal: causal stride-2 convolutions (needs ``padding=1``).
    """

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        factor: int = 4,
        channels: int = 64,
        padding: int = 0,
        depthwise: bool = False,
        causal: bool = False,
    ) -> None:
        super().__init__()
        if factor < 2 or factor & (factor - 1):
            raise ValueError(f"subsampling factor must be a power of two >= 2, got {factor}")
        if padding not in (0, 1):
            raise ValueError(f"subsampling padding must be 0 or 1, got {padding}")
        if causal and padding != 1:
            raise ValueError("causal subsampling needs padding=1 (NeMo's striding or dw_striding layouts)")
        self.factor = factor
        self.num_layers = factor.bit_length() - 1
        self.causal = causal
        self.total_padding = 3 if causal else 2 * padding  # per stride-2 layer, before + after
        conv = CausalConv2d if causal else nn.Conv2d
        padding = 0 if causal else padding  # CausalConv2d pads in its forward
        layers: list[nn.Module] = [conv(1, channels, kernel_size=3, stride=2, padding=padding), nn.ReLU()]
        for _ in range(self.num_layers - 1):
            if depthwise:
                layers += [
                    conv(channels, channels, kernel_size=3, stride=2, padding=padding, groups=channels),
                    nn.Conv2d(channels, channels, kernel_size=1),
                ]
            else:
                layers.append(conv(channels, channels, kernel_size=3, stride=2, padding=padding))
            layers.append(nn.ReLU())
        freq = input_dim
        for _ in range(self.num_layers):
            freq = self._shorten(freq)
        if freq < 1:
            raise ValueError(f"input_dim={input_dim} is too small for subsampling factor {factor}")
        self.conv = nn.Sequential(*layers)
        self.out = nn.Linear(channels * freq, output_dim)

    def _shorten(self, length):
        """One stride-2, kernel-3 layer: L -> floor((L + padding before + after - 3) / 2) + 1 (int or int64 tensor)."""
        return (length + self.total_padding - 3) // 2 + 1

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Exact number of output frames for (B,) input lengths."""
        for _ in range(self.num_layers):
            lengths = self._shorten(lengths)
        return lengths

    def min_input_length(self) -> int:
        """Shortest input that still yields one output frame."""
        length = 1
        for _ in range(self.num_layers):
            length = max(1, 2 * length + 1 - self.total_padding)
        return length

    def forward(
        self, features: torch.Tensor, lengths: torch.Tensor, starts: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F) features, (B,) lengths -> (B, T', D) frames, (B,) lengths with T' = max(lengths').

        `starts`: (B,) frames before each row's first real frame, masked like padding at every layer (a
        streaming step's window; multiples of the factor, so each layer halves them exactly). The lengths
        then count from the window's start.
        """
        x = _time_mask(features.unsqueeze(1), lengths, starts)  # (B, 1, T, F)
        for layer in self.conv:
            x = layer(x)
            if isinstance(layer, nn.Conv2d):
                if layer.stride[0] == 2:
                    lengths = self._shorten(lengths)
                    starts = None if starts is None else starts // 2
                x = _time_mask(x, lengths, starts)
        b, c, t, f = x.shape  # (B, C, T', F')
        x = self.out(x.transpose(1, 2).reshape(b, t, c * f))  # (B, T', D)
        return x, lengths
