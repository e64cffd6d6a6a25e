"""Log-mel front end computed as NeMo's ``AudioToMelSpectrogramPreprocessor`` does (per-utterance normalised).

Steps on 16 kHz audio: dither (training mode only) -> pre-emphasis -> centred STFT (zero-padded,
symmetric Hann window) -> power spectrum -> slaney mel filterbank -> log(x + guard) -> per-utterance,
per-bin mean/std normalisation over the valid frames (std unbiased, + 1e-5) -> padded frames set to 0.
An utterance of S samples has S // hop frames (NeMo's count; the STFT's last, centred frame is dropped).
"""

from __future__ import annotations

import torch
import torchaudio
from torch import nn

STD_FLOOR = 1e-5  # added to every standard deviation, as NeMo's normalize_batch does


class NemoMelFrontend(nn.Module):
    """(B, S) audio and (B,) sample counts -> (B, T, F) normalised log-mel features and (B,) frame counts.

    Args:
        sample_rate: of the input audio.
        num_mel_bins: F.
        n_fft: FFT size (NeMo: 512).
        win_length, hop_length: in samples (25 ms and 10 ms at 16 kHz: 400 and 160).
        preemphasis: coefficient of x[t] - a x[t-1]; None or 0 disables it.
        dither: Gaussian noise std added in training mode only.
        log_guard: added to the mel power before the log (NeMo: 2^-24).
        f_min, f_max: mel filterbank range (f_max None = sample_rate / 2).
    """

    def __init__(self, sample_rate: int = 16000, num_mel_bins: int = 80, n_fft: int = 512, win_length: int = 400,
                 hop_length: int = 160, preemphasis: float | None = 0.97, dither: float = 1e-5,
                 log_guard: float = 2.0**-24, f_min: float = 0.0, f_max: float | None = None) -> None:
        super().__init__()
        if win_length > n_fft:
            raise ValueError(f"win_length={win_length} must not exceed n_fft={n_fft}")
        self.sample_rate = sample_rate
        self.n_fft = n_fft
        self.win_length = win_length
        self.hop_length = hop_length
        self.preemphasis = preemphasis or None
        self.dither = dither
        self.log_guard = log_guard
        self.register_buffer("window", torch.hann_window(win_length, periodic=False), persistent=False)
        fbank = torchaudio.functional.melscale_fbanks(
            n_fft // 2 + 1, f_min, f_max if f_max is not None else sample_rate / 2, num_mel_bins, sample_rate,
            norm="slaney", mel_scale="slaney",
        )  # (n_fft/2 + 1, F), the same filters as librosa.filters.mel(norm="slaney")
        self.register_buffer("fbank", fbank, persistent=False)

    def num_frames(self, num_samples: torch.Tensor) -> torch.Tensor:
        """(B,) sample counts -> (B,) int64 feature frames."""
        return torch.div(num_samples, self.hop_length, rounding_mode="floor").long()

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) float audio, (B,) int64 sample counts -> (B, T, F) float32 features, (B,) int64 frame counts.

        Raises ValueError naming the utterance when one is shorter than two frames (2 * hop samples):
        its standard deviation would be undefined.
        """
        if audio.ndim != 2 or lengths.shape != audio.shape[:1]:
            raise ValueError(f"audio must be (B, S) with lengths (B,), got {tuple(audio.shape)} and {tuple(lengths.shape)}")
        frames = self.num_frames(lengths)
        if bool((frames < 2).any()):
            index = int((frames < 2).nonzero()[0])
            raise ValueError(f"utterance {index} has {int(lengths[index])} samples; the front end needs at least "
                             f"{2 * self.hop_length} (two frames) to normalise it")
        x = audio.float()
        valid = torch.arange(x.shape[1], device=x.device) < lengths.unsqueeze(1)  # (B, S)
        if self.training and self.dither > 0:
            x = x + self.dither * torch.randn_like(x)
        if self.preemphasis is not None:
            x = torch.cat([x[:, :1], x[:, 1:] - self.preemphasis * x[:, :-1]], dim=1)
        x = x.masked_fill(~valid, 0.0)
        spec = torch.stft(x, self.n_fft, self.hop_length, self.win_length, self.window, center=True,
                          pad_mode="constant", return_complex=True)  # (B, n_fft/2 + 1, S // hop + 1)
        power = torch.view_as_real(spec).pow(2).sum(-1)  # |X|^2
        mel = torch.matmul(power.transpose(1, 2), self.fbank)  # (B, T_stft, F)
        logmel = torch.log(mel + self.log_guard)[:, : int(frames.max())]  # (B, T, F)
        keep = (torch.arange(logmel.shape[1], device=x.device) < frames.unsqueeze(1)).unsqueeze(-1)  # (B, T, 1)
        count = frames.to(logmel.dtype)[:, None]  # (B, 1)
        mean = torch.where(keep, logmel, 0.0).sum(1) / count  # (B, F)
        centred = torch.where(keep, logmel - mean.unsqueeze(1), 0.0)
        std = (centred.pow(2).sum(1) / (count - 1)).sqrt() + STD_FLOOR  # (B, F)
        return centred / std.unsqueeze(1), frames
