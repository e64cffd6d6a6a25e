"""80-bin log-mel features (25 ms window, 10 ms hop at 16 kHz) and global mean/variance normalisation: the front end
of kind "logmel" (`LogMelFrontend`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torchaudio
from torch import nn

from asr_plugin.audio.reading import SAMPLE_RATE
from asr_plugin.files import write_text_atomic


class LogMelFeatures(nn.Module):
    """log(max(mel power, log_floor)) of a waveform.

    The STFT is centred (zero-padded by n_fft/2 at both ends), so an utterance of N >= 1 samples gives
    exactly `num_frames(N) = N // hop + 1` frames: 1 + N // 160 at 16 kHz.

    Args:
        sample_rate: of the input audio.
        num_mel_bins: F, the feature dimension.
        window_ms, hop_ms: analysis window and frame shift.
        log_floor: power floor before the log, so digital silence stays finite.
    """

    def __init__(
        self,
        sample_rate: int = SAMPLE_RATE,
        num_mel_bins: int = 80,
        window_ms: float = 25.0,
        hop_ms: float = 10.0,
        log_floor: float = 1e-6,
    ):
        super().__init__()
        self.sample_rate = sample_rate
        self.num_mel_bins = num_mel_bins
        self.win_length = round(sample_rate * window_ms / 1000)
        self.hop_length = round(sample_rate * hop_ms / 1000)
        self.log_floor = log_floor
        self.n_fft = 1 << (self.win_length - 1).bit_length()  # next power of two: 512 for 400 samples
        self.mel = torchaudio.transforms.MelSpectrogram(
            sample_rate=sample_rate,
            n_fft=self.n_fft,
            win_length=self.win_length,
            hop_length=self.hop_length,
            n_mels=num_mel_bins,
            center=True,
            pad_mode="constant",
            power=2.0,
        )  # zero (not reflect) padding at the edges, so even inputs shorter than a window work

    def num_frames(self, num_samples: int) -> int:
        """Frames produced for `num_samples` samples."""
        return num_samples // self.hop_length + 1

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        """(N,) or (B, N) float waveform -> (T, F) or (B, T, F) float32 log-mel."""
        mel = self.mel(waveform.float())  # (..., F, T)
        return mel.clamp_min(self.log_floor).log().transpose(-1, -2).contiguous()


@dataclass
class FeatureStats:
    """Per-dimension mean and standard deviation over all training frames, each (F,)."""

    mean: torch.Tensor
    std: torch.Tensor
    num_frames: int

    def save(self, path: str | os.PathLike) -> Path:
        """Writes JSON {"mean": [...], "std": [...], "num_frames": n} atomically."""
        record = {"mean": self.mean.tolist(), "std": self.std.tolist(), "num_frames": self.num_frames}
        return write_text_atomic(path, json.dumps(record, indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "FeatureStats":
        """Reads a file written by `save`; raises ValueError naming the file when it is malformed."""
        try:
            record = json.loads(Path(path).read_text(encoding="utf-8"))
            mean = torch.tensor(record["mean"], dtype=torch.float32)
            std = torch.tensor(record["std"], dtype=torch.float32)
            num_frames = int(record["num_frames"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: not a feature stats file ({err!r})") from None
        if mean.ndim != 1 or mean.shape != std.shape or bool((std <= 0).any()):
            raise ValueError(f"{path}: mean/std must be two equal-length vectors with std > 0")
        return cls(mean=mean, std=std, num_frames=num_frames)

    @classmethod
    def from_sums(
        cls, total: torch.Tensor, total_sq: torch.Tensor, num_frames: int, min_std: float = 1e-5
    ) -> "FeatureStats":
        """Builds stats from float64 sums of x and x^2 over `num_frames` frames."""
        if num_frames <= 0:
            raise ValueError("num_frames must be positive to compute feature stats")
        mean = total / num_frames
        var = (total_sq / num_frames - mean.square()).clamp_min(min_std**2)
        return cls(mean=mean.float(), std=var.sqrt().float(), num_frames=num_frames)


class GlobalNormalize(nn.Module):
    """(x - mean) / std with fixed `FeatureStats`, on (..., F) features."""

    def __init__(self, stats: FeatureStats):
        super().__init__()
        self.register_buffer("mean", stats.mean.clone())
        self.register_buffer("inv_std", 1.0 / stats.std)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.shape[-1] != self.mean.shape[0]:
            raise ValueError(f"features: last dim {features.shape[-1]} != stats dim {self.mean.shape[0]}")
        return (features - self.mean) * self.inv_std


class LogMelFrontend(nn.Module):
    """`LogMelFeatures` then `GlobalNormalize`, on a batch: (B, S) audio, (B,) sample counts ->
    (B, T, F) features (frames past an utterance's end set to 0, the normalised mean) and (B,) frame counts.

    A batch gives each utterance exactly the frames it gets alone: the STFT is centred with zero padding,
    and the samples after an utterance's end are zeros either way.
    """

    def __init__(self, options: Mapping[str, Any], stats: FeatureStats):
        super().__init__()
        self.features = LogMelFeatures(**options)
        self.normalize = GlobalNormalize(stats)
        if stats.mean.numel() != self.features.num_mel_bins:
            raise ValueError(
                f"front-end spec: mean/std have {stats.mean.numel()} values, "
                f"num_mel_bins is {self.features.num_mel_bins}"
            )

    @property
    def sample_rate(self) -> int:
        return self.features.sample_rate

    @property
    def hop_length(self) -> int:
        return self.features.hop_length

    @property
    def num_mel_bins(self) -> int:
        return self.features.num_mel_bins

    @property
    def n_fft(self) -> int:
        return self.features.n_fft

    def num_frames(self, num_samples: torch.Tensor) -> torch.Tensor:
        """(B,) sample counts -> (B,) int64 frames."""
        return torch.div(num_samples, self.hop_length, rounding_mode="floor").long() + 1

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if audio.ndim != 2 or lengths.shape != audio.shape[:1]:
            raise ValueError(
                f"audio must be (B, S) with lengths (B,), got {tuple(audio.shape)} and {tuple(lengths.shape)}"
            )
        frames = self.num_frames(lengths)
        features = self.normalize(self.features(audio))  # (B, S // hop + 1, F)
        valid = torch.arange(features.shape[1], device=features.device) < frames.unsqueeze(1)  # (B, T)
        return features.masked_fill(~valid.unsqueeze(-1), 0.0), frames
