"""Log-mel front end computed as NeMo's ``AudioToMelSpectrogramPreprocessor`` does (per-utterance normalised).

Steps on 16 kHz audio: dither (training mode only) -> pre-emphasis -> centred STFT (zero-padded,
symmetric window) -> magnitude^mag_power (2: the power spectrum) -> mel filterbank (slaney scale) ->
log(x + guard) or log(max(x, guard)) -> normalisation over each utterance's valid frames (per mel bin or
over all bins; std unbiased, + 1e-5) -> padded frames set to 0. An utterance of S samples has S // hop frames
(NeMo's count; the STFT's last, centred frame is dropped).
"""

from __future__ import annotations

import torch
import torchaudio
from torch import nn

STD_FLOOR = 1e-5  # added to every standard deviation, as NeMo's normalize_batch does
WINDOWS = {
    "hann": torch.hann_window,
    "hamming": torch.hamming_window,
    "blackman": torch.blackman_window,
    "bartlett": torch.bartlett_window,
}
NORMALIZATIONS = ("per_feature", "all_features", None)
LOG_GUARD_TYPES = ("add", "clamp")
MEL_NORMS = ("slaney", None)


def normalize_utterances(
    features: torch.Tensor, keep: torch.Tensor, frames: torch.Tensor, normalize: str | None
) -> torch.Tensor:
    """(B, T, F) features standardised over each utterance's valid frames, as NeMo's ``normalize_batch``.

    Args:
        keep: (B, T, 1) bool, True on valid frames; frames: (B,) their counts.
        normalize: "per_feature" (a mean and std per bin), "all_features" (one per utterance) or None (unchanged).
    Returns:
        (B, T, F); padded frames are 0 (unless `normalize` is None).
    """
    if normalize is None:
        return features
    dims = (1,) if normalize == "per_feature" else (1, 2)
    count = frames.to(features.dtype)[:, None, None] * (1 if normalize == "per_feature" else features.shape[2])
    mean = torch.where(keep, features, 0.0).sum(dims, keepdim=True) / count  # (B, 1, F) or (B, 1, 1)
    centred = torch.where(keep, features - mean, 0.0)
    std = (centred.pow(2).sum(dims, keepdim=True) / (count - 1)).sqrt() + STD_FLOOR
    return centred / std


class NemoMelFrontend(nn.Module):
    """(B, S) audio and (B,) sample counts -> (B, T, F) log-mel features and (B,) frame counts.

    Args:
        sample_rate: of the input audio.
        num_mel_bins: F.
        n_fft: FFT size (NeMo: 512).
        win_length, hop_length: in samples (25 ms and 10 ms at 16 kHz: 400 and 160).
        preemphasis: coefficient of x[t] - a x[t-1]; None or 0 disables it.
        dither: Gaussian noise std added in training mode only.
        log_guard: the floor of the log (NeMo's ``log_zero_guard_value``, 2^-24; its "tiny" and "eps" are
            float32's ``finfo`` values, which the importer passes as numbers).
        f_min, f_max: mel filterbank range (f_max None = sample_rate / 2).
        window: "hann", "hamming", "blackman" or "bartlett", symmetric (NeMo's ``window``).
        normalize: "per_feature" (each mel bin over the utterance's frames), "all_features" (one mean and
            std per utterance) or None (NeMo's ``normalize``).
        mag_power: the STFT magnitude's exponent (2: power spectrum, 1: magnitude).
        log: take the log (NeMo's ``log``); False leaves the mel energies.
        log_guard_type: "add" (log(x + guard)) or "clamp" (log(max(x, guard))), NeMo's ``log_zero_guard_type``.
        mel_norm: "slaney" (area-normalised filters) or None (peak 1), NeMo's ``mel_norm``.
    """

    def __init__(
        self,
        sample_rate: int = 16000,
        num_mel_bins: int = 80,
        n_fft: int = 512,
        win_length: int = 400,
        hop_length: int = 160,
        preemphasis: float | None = 0.97,
        dither: float = 1e-5,
        log_guard: float = 2.0**-24,
        f_min: float = 0.0,
        f_max: float | None = None,
        window: str = "hann",
        normalize: str | None = "per_feature",
        mag_power: float = 2.0,
        log: bool = True,
        log_guard_type: str = "add",
        mel_norm: str | None = "slaney",
    ) -> None:
        super().__init__()
        if win_length > n_fft:
            raise ValueError(f"win_length={win_length} must not exceed n_fft={n_fft}")
        for name, value, allowed in (
            ("window", window, tuple(WINDOWS)),
            ("normalize", normalize, NORMALIZATIONS),
            ("log_guard_type", log_guard_type, LOG_GUARD_TYPES),
            ("mel_norm", mel_norm, MEL_NORMS),
        ):
            if value not in allowed:
                raise ValueError(f"{name}={value!r}; choose one of {allowed}")
        if not log_guard > 0:
            raise ValueError(f"log_guard={log_guard!r} must be a positive number")
        self.sample_rate = sample_rate
        self.num_mel_bins = num_mel_bins
        self.f_min, self.f_max = f_min, f_max
        self.window_name = window
        self.mel_norm = mel_norm
        self.n_fft = n_fft
        self.win_length = win_length
        self.hop_length = hop_length
        self.preemphasis = preemphasis or None
        self.dither = dither
        self.log_guard = log_guard
        self.normalize = normalize
        self.mag_power = float(mag_power)
        self.log = log
        self.log_guard_type = log_guard_type
        self.register_buffer("window", WINDOWS[window](win_length, periodic=False), persistent=False)
        fbank = torchaudio.functional.melscale_fbanks(
            n_fft // 2 + 1,
            f_min,
            f_max if f_max is not None else sample_rate / 2,
            num_mel_bins,
            sample_rate,
            norm=mel_norm,
            mel_scale="slaney",
        )  # (n_fft/2 + 1, F), the same filters as librosa.filters.mel(norm=mel_norm), NeMo's
        self.register_buffer("fbank", fbank, persistent=False)

    def num_frames(self, num_samples: torch.Tensor) -> torch.Tensor:
        """(B,) sample counts -> (B,) int64 feature frames."""
        return torch.div(num_samples, self.hop_length, rounding_mode="floor").long()

    def _spectrum(self, x: torch.Tensor) -> torch.Tensor:
        """(B, S) float32 audio -> (B, n_fft/2 + 1, S // hop + 1) |STFT|^mag_power."""
        spec = torch.stft(
            x,
            self.n_fft,
            self.hop_length,
            self.win_length,
            self.window,
            center=True,
            pad_mode="constant",
            return_complex=True,
        )
        power = torch.view_as_real(spec).pow(2).sum(-1)  # |X|^2
        return power if self.mag_power == 2.0 else power.sqrt().pow(self.mag_power)

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) float audio, (B,) int64 sample counts -> (B, T, F) float32 features, (B,) int64 frame counts.

        Raises ValueError naming the utterance when one is shorter than two frames (2 * hop samples):
        its standard deviation would be undefined.
        """
        if audio.ndim != 2 or lengths.shape != audio.shape[:1]:
            raise ValueError(
                f"audio must be (B, S) with lengths (B,), got {tuple(audio.shape)} and {tuple(lengths.shape)}"
            )
        frames = self.num_frames(lengths)
        if bool((frames < 2).any()):
            index = int((frames < 2).nonzero()[0])
            raise ValueError(
                f"utterance {index} has {int(lengths[index])} samples; the front end needs at least "
                f"{2 * self.hop_length} (two frames) to normalise it"
            )
        x = audio.float()
        valid = torch.arange(x.shape[1], device=x.device) < lengths.unsqueeze(1)  # (B, S)
        if self.training and self.dither > 0:
            x = x + self.dither * torch.randn_like(x)
        if self.preemphasis is not None:
            x = torch.cat([x[:, :1], x[:, 1:] - self.preemphasis * x[:, :-1]], dim=1)
        x = x.masked_fill(~valid, 0.0)
        mel = torch.matmul(self._spectrum(x).transpose(1, 2), self.fbank)[:, : int(frames.max())]  # (B, T, F)
        if self.log:
            mel = torch.log(mel + self.log_guard if self.log_guard_type == "add" else mel.clamp(min=self.log_guard))
        keep = (torch.arange(mel.shape[1], device=x.device) < frames.unsqueeze(1)).unsqueeze(-1)  # (B, T, 1)
        return normalize_utterances(mel, keep, frames, self.normalize).masked_fill(~keep, 0.0), frames
