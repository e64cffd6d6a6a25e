"""Training-time augmentation: SpecAugment on batches and speed perturbation of waveforms."""

from __future__ import annotations

import torch
import torchaudio
from torch import nn


class SpecAugment(nn.Module):
    """Time warp, frequency masks and time masks, drawn independently per utterance, for a whole batch at
    once (no Python loop over utterances: on a GPU a few kernels per batch).

    Masks follow torchaudio's ``FrequencyMasking``/``TimeMasking`` per utterance: a mask's width is
    ``floor(u * max_width)`` and its start ``floor(u' * (size - width))`` for uniform u, u'. A time mask's
    maximum width is `max_time_mask_ratio` of that utterance's own frames (NeMo's ``time_width``), capped
    at `time_mask_width` frames when that is set; masks stay inside the valid frames, so padding never
    absorbs one. Masked values are 0, the mean of globally normalised features. Time warp (SpecAugment's
    first step, off by default) moves a random frame c of [W, T_b - W) by up to ±W frames, stretching
    the frames before it and squeezing those after it (linear interpolation). In eval mode: a no-op.

    Args:
        num_freq_masks: masks along the feature axis per utterance.
        freq_mask_width: maximum width (bins) of each frequency mask.
        num_time_masks: masks along time per utterance.
        time_mask_width: maximum width (frames) of each time mask; None = only the ratio limits it.
        max_time_mask_ratio: maximum width of one time mask as a fraction of the utterance's frames.
        time_warp: W, the largest shift (frames) of the warp point; 0 = no time warp.
    """

    def __init__(
        self,
        num_freq_masks: int = 2,
        freq_mask_width: int = 27,
        num_time_masks: int = 10,
        time_mask_width: int | None = None,
        max_time_mask_ratio: float = 0.05,
        time_warp: int = 0,
    ):
        super().__init__()
        for name, value in (
            ("num_freq_masks", num_freq_masks),
            ("freq_mask_width", freq_mask_width),
            ("num_time_masks", num_time_masks),
            ("time_mask_width", time_mask_width or 0),
            ("time_warp", time_warp),
        ):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if not 0.0 < max_time_mask_ratio <= 1.0:
            raise ValueError(f"max_time_mask_ratio must be in (0, 1], got {max_time_mask_ratio}")
        self.num_freq_masks = num_freq_masks
        self.freq_mask_width = freq_mask_width
        self.num_time_masks = num_time_masks
        self.time_mask_width = time_mask_width
        self.max_time_mask_ratio = max_time_mask_ratio
        self.time_warp = time_warp

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T, F) features and (B,) valid frame counts -> (B, T, F) augmented copy (the input itself in eval)."""
        if not self.training:
            return features
        if features.ndim != 3 or lengths.shape != features.shape[:1]:
            raise ValueError(
                f"features must be (B, T, F) with lengths (B,), got {tuple(features.shape)} and {tuple(lengths.shape)}"
            )
        batch, frames, bins = features.shape
        lengths = lengths.to(features.device)
        if self.time_warp > 0:
            features = warp_time(features, lengths, self.time_warp)
        time = torch.arange(frames, device=features.device)
        valid = time < lengths[:, None]  # (B, T)
        max_widths = (lengths.to(torch.float32) * self.max_time_mask_ratio).floor()  # (B,), as torchaudio's int()
        if self.time_mask_width is not None:
            max_widths = max_widths.clamp(max=self.time_mask_width)
        time_masked = _masks(max_widths, lengths, self.num_time_masks, frames)  # (B, T)
        freq_masked = _masks(
            torch.full((batch,), float(self.freq_mask_width), device=features.device),
            torch.full((batch,), bins, device=features.device),
            self.num_freq_masks,
            bins,
        )  # (B, F)
        masked = (time_masked[:, :, None] | freq_masked[:, None, :]) & valid[:, :, None]  # (B, T, F)
        return features.masked_fill(masked, 0.0)


def _masks(max_widths: torch.Tensor, sizes: torch.Tensor, count: int, axis_size: int) -> torch.Tensor:
    """(B,) maximum widths and (B,) valid sizes -> (B, axis_size) bool: the union of `count` masks per row,
    each ``[start, start + width)`` with ``width = floor(u * max_width)``, ``start = floor(u' * (size - width))``."""
    batch = sizes.shape[0]
    if count == 0:
        return torch.zeros(batch, axis_size, dtype=torch.bool, device=sizes.device)
    widths = torch.rand(batch, count, device=sizes.device) * max_widths[:, None]  # (B, N)
    starts = (torch.rand(batch, count, device=sizes.device) * (sizes[:, None] - widths)).long()  # (B, N)
    ends = starts + widths.long()
    position = torch.arange(axis_size, device=sizes.device)[None, None, :]  # (1, 1, S)
    return ((position >= starts[:, :, None]) & (position < ends[:, :, None])).any(dim=1)


def warp_time(features: torch.Tensor, lengths: torch.Tensor, window: int) -> torch.Tensor:
    """(B, T, F) features, (B,) lengths -> (B, T, F): per utterance of more than 2 * `window` frames, the
    point c (uniform in [window, T_b - window)) moves to c + w (w uniform in [-window, window]); frames
    [0, c) are resampled onto [0, c + w) and [c, T_b) onto [c + w, T_b) by linear interpolation. Shorter
    utterances and the padding are returned unchanged; the first and last frames stay where they are."""
    batch, frames, _ = features.shape
    device = features.device
    warpable = lengths > 2 * window  # (B,)
    length = lengths.to(torch.float32)
    centre = window + torch.rand(batch, device=device) * (length - 2 * window)  # (B,)
    centre = centre.floor().clamp(min=1)
    shift = torch.randint(-window, window + 1, (batch,), device=device).to(torch.float32)
    last = length - 1
    target = (centre + shift).clamp(min=1).minimum((last - 1).clamp(min=1))  # (B,) where c lands
    t = torch.arange(frames, device=device, dtype=torch.float32)[None, :]  # (1, T)
    # piecewise linear: 0 -> 0, target -> centre, last -> last
    before = t * (centre / target)[:, None]
    after = centre[:, None] + (t - target[:, None]) * ((last - centre) / (last - target).clamp(min=1))[:, None]
    source = torch.where(t < target[:, None], before, after)  # (B, T) fractional source frame
    keep = ~warpable[:, None] | (t >= length[:, None])
    source = torch.where(keep, t.expand(batch, -1), source.clamp(max=(length - 1)[:, None]))
    low = source.floor().long().clamp(0, frames - 1)
    high = (low + 1).clamp(max=(lengths - 1).clamp(min=0)[:, None].expand(-1, frames)).maximum(low)
    frac = (source - low.to(torch.float32))[:, :, None].to(features.dtype)

    def frames_at(index: torch.Tensor) -> torch.Tensor:  # (B, T) frame numbers -> (B, T, F) those frames
        return torch.gather(features, 1, index[:, :, None].expand_as(features))

    return frames_at(low) * (1 - frac) + frames_at(high) * frac


def speed_perturb(waveform: torch.Tensor, factor: float, sample_rate: int) -> torch.Tensor:
    """Plays (N,) audio `factor` times faster by resampling (pitch moves too, as with sox `speed`):
    the result has about N / factor samples."""
    if factor <= 0:
        raise ValueError(f"speed factor must be positive, got {factor}")
    if factor == 1.0:
        return waveform
    return torchaudio.functional.resample(waveform, orig_freq=round(sample_rate * factor), new_freq=sample_rate)
