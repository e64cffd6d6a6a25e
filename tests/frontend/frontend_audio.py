"""Test audio for the front-end tests (a uniquely named module, imported by name from tests/data)."""

from __future__ import annotations

import numpy as np
import torch


def speechlike(length: int, seed: int) -> np.ndarray:
    """Noise through a resonance with a loud and a quiet half, in [-1, 1]: energies over many decades."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.1, length)
    for i in range(2, length):
        x[i] += 1.6 * x[i - 1] * 0.9 - 0.81 * x[i - 2]
    x *= np.where(np.arange(length) < length // 2, 1.0, 1e-3)
    return (x / max(np.abs(x).max(initial=0.0), 1e-30) * 0.9).astype(np.float32)


def audio_batch(waveforms) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) zero-padded audio and (B,) lengths of 1-D float32 waveforms."""
    lengths = torch.tensor([len(w) for w in waveforms])
    audio = torch.zeros(len(waveforms), int(lengths.max()))
    for i, w in enumerate(waveforms):
        audio[i, : len(w)] = torch.from_numpy(w)
    return audio, lengths
