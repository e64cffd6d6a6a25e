"""Convolutional front-end that shortens log-mel frames before the Conformer."""

from __future__ import annotations

import torch
from torch import nn


class Conv2dSubsampling(nn.Module):
    """Stack of stride-2 3x3 convolutions (x2 per layer) followed by a linear projection.

    Each layer maps a length L to ``(L - 1) // 2`` (kernel 3, stride 2, no padding), so the output
    lengths are exact, not rounded estimates. ``factor`` must be a power of two (2, 4, 8, ...).

    Args:
        input_dim: F, feature bins per frame (80 log-mel bins).
        output_dim: D, the encoder's model dimension.
        factor: time reduction; 4 gives 40 ms frames from 10 ms features.
        channels: convolution channels.
    """

    def __init__(self, input_dim: int, output_dim: int, factor: int = 4, channels: int = 64) -> None:
        super().__init__()
        if factor < 2 or factor & (factor - 1):
            raise ValueError(f"subsampling factor must be a power of two >= 2, got {factor}")
        self.num_layers = factor.bit_length() - 1
        layers: list[nn.Module] = []
        in_channels, freq = 1, input_dim
        for _ in range(self.num_layers):
            layers += [nn.Conv2d(in_channels, channels, kernel_size=3, stride=2), nn.ReLU()]
            in_channels, freq = channels, (freq - 1) // 2
        if freq < 1:
            raise ValueError(f"input_dim={input_dim} is too small for subsampling factor {factor}")
        self.conv = nn.Sequential(*layers)
        self.out = nn.Linear(channels * freq, output_dim)

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Exact number of output frames for (B,) input lengths."""
        for _ in range(self.num_layers):
            lengths = torch.div(lengths - 1, 2, rounding_mode="floor")
        return lengths

    def min_input_length(self) -> int:
        """Shortest input that still yields one output frame."""
        length = 1
        for _ in range(self.num_layers):
            length = 2 * length + 1
        return length

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F) features, (B,) lengths -> (B, T', D) frames, (B,) lengths with T' = max(lengths')."""
        x = self.conv(features.unsqueeze(1))  # (B, C, T', F')
        b, c, t, f = x.shape
        x = self.out(x.transpose(1, 2).reshape(b, t, c * f))  # (B, T', D)
        return x, self.output_lengths(lengths)
