"""Convolutional front-end that shortens log-mel frames before the Conformer."""

from __future__ import annotations

import torch
from torch import nn


def _time_mask(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, C, T, F) with frames t >= lengths[b] set to zero."""
    keep = torch.arange(x.shape[2], device=x.device) < lengths.unsqueeze(1)  # (B, T)
    return x * keep[:, None, :, None].to(x.dtype)


class Conv2dSubsampling(nn.Module):
    """Stack of stride-2 3x3 convolutions (x2 per layer, ReLU after each) followed by a linear projection.

    Three layouts, all with exact integer output lengths:

    - ``padding=0`` (the original front-end): a length L becomes ``(L - 1) // 2`` per layer.
    - ``padding=1``: NeMo's "striding" subsampling (Conformer); L becomes ``(L - 1) // 2 + 1``.
    - ``padding=1, depthwise=True``: NeMo's "dw_striding" (FastConformer): the first layer is a full
      convolution, each later one a depthwise 3x3 followed by a pointwise 1x1.

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
    """

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        factor: int = 4,
        channels: int = 64,
        padding: int = 0,
        depthwise: bool = False,
    ) -> None:
        super().__init__()
        if factor < 2 or factor & (factor - 1):
            raise ValueError(f"subsampling factor must be a power of two >= 2, got {factor}")
        if padding not in (0, 1):
            raise ValueError(f"subsampling padding must be 0 or 1, got {padding}")
        self.num_layers = factor.bit_length() - 1
        self.padding = padding
        layers: list[nn.Module] = [nn.Conv2d(1, channels, kernel_size=3, stride=2, padding=padding), nn.ReLU()]
        for _ in range(self.num_layers - 1):
            if depthwise:
                layers += [
                    nn.Conv2d(channels, channels, kernel_size=3, stride=2, padding=padding, groups=channels),
                    nn.Conv2d(channels, channels, kernel_size=1),
                ]
            else:
                layers.append(nn.Conv2d(channels, channels, kernel_size=3, stride=2, padding=padding))
            layers.append(nn.ReLU())
        freq = input_dim
        for _ in range(self.num_layers):
            freq = self._shorten(freq)
        if freq < 1:
            raise ValueError(f"input_dim={input_dim} is too small for subsampling factor {factor}")
        self.conv = nn.Sequential(*layers)
        self.out = nn.Linear(channels * freq, output_dim)

    def _shorten(self, length):
        """One stride-2, kernel-3 layer: L -> floor((L + 2 * padding - 3) / 2) + 1 (int or int64 tensor)."""
        return (length + 2 * self.padding - 3) // 2 + 1

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Exact number of output frames for (B,) input lengths."""
        for _ in range(self.num_layers):
            lengths = self._shorten(lengths)
        return lengths

    def min_input_length(self) -> int:
        """Shortest input that still yields one output frame."""
        length = 1
        for _ in range(self.num_layers):
            length = max(1, 2 * length + 1 - 2 * self.padding)
        return length

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F) features, (B,) lengths -> (B, T', D) frames, (B,) lengths with T' = max(lengths')."""
        x = _time_mask(features.unsqueeze(1), lengths)  # (B, 1, T, F)
        for layer in self.conv:
            x = layer(x)
            if isinstance(layer, nn.Conv2d):
                if layer.stride[0] == 2:
                    lengths = self._shorten(lengths)
                x = _time_mask(x, lengths)
        b, c, t, f = x.shape  # (B, C, T', F')
        x = self.out(x.transpose(1, 2).reshape(b, t, c * f))  # (B, T', D)
        return x, lengths
