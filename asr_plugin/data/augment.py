"""Training-time augmentation: SpecAugment on batches and speed perturbation of waveforms."""

from __future__ import annotations

import torch
import torchaudio
from torch import nn


class SpecAugment(nn.Module):
    """Frequency and time masking (torchaudio FrequencyMasking/TimeMasking), per utterance.

    Masks are drawn independently for each utterance inside its valid length only, so padding never
    absorbs a mask, and a time mask covers at most `max_time_mask_ratio` of that utterance's frames.
    Masked values are set to 0, the mean of globally normalised features. In eval mode this is a no-op.

    Args:
        num_freq_masks: masks along the feature axis per utterance.
        freq_mask_width: maximum width (bins) of each frequency mask.
        num_time_masks: masks along time per utterance.
        time_mask_width: maximum width (frames) of each time mask.
        max_time_mask_ratio: cap of one time mask's width as a fraction of the utterance's frames.
    """

    def __init__(self, num_freq_masks: int = 2, freq_mask_width: int = 27, num_time_masks: int = 10,
                 time_mask_width: int = 40, max_time_mask_ratio: float = 0.05):
        super().__init__()
        for name, value in (("num_freq_masks", num_freq_masks), ("freq_mask_width", freq_mask_width),
                            ("num_time_masks", num_time_masks), ("time_mask_width", time_mask_width)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if not 0.0 < max_time_mask_ratio <= 1.0:
            raise ValueError(f"max_time_mask_ratio must be in (0, 1], got {max_time_mask_ratio}")
        self.num_freq_masks = num_freq_masks
        self.num_time_masks = num_time_masks
        self.freq_mask = torchaudio.transforms.FrequencyMasking(freq_mask_width)
        self.time_mask = torchaudio.transforms.TimeMasking(time_mask_width, p=max_time_mask_ratio)

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T, F) features and (B,) valid frame counts -> (B, T, F) masked copy (the input itself in eval)."""
        if not self.training:
            return features
        if features.ndim != 3 or lengths.shape != features.shape[:1]:
            raise ValueError(f"features must be (B, T, F) with lengths (B,), got {tuple(features.shape)} "
                             f"and {tuple(lengths.shape)}")
        out = features.clone()
        for b, length in enumerate(lengths.tolist()):
            spec = out[b, :length].transpose(0, 1).unsqueeze(0)  # (1, F, T_b), torchaudio's layout
            for _ in range(self.num_freq_masks):
                spec = self.freq_mask(spec)
            for _ in range(self.num_time_masks):
                spec = self.time_mask(spec)
            out[b, :length] = spec.squeeze(0).transpose(0, 1)
        return out


def speed_perturb(waveform: torch.Tensor, factor: float, sample_rate: int) -> torch.Tensor:
    """Plays (N,) audio `factor` times faster by resampling (pitch moves too, as with sox `speed`):
    the result has about N / factor samples."""
    if factor <= 0:
        raise ValueError(f"speed factor must be positive, got {factor}")
    if factor == 1.0:
        return waveform
    return torchaudio.functional.resample(waveform, orig_freq=round(sample_rate * factor), new_freq=sample_rate)
