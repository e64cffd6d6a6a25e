"""The features sherpa-onnx computes for a ``model_type="nemo_transducer"`` model, written down once.

sherpa-onnx (2.0.1) computes them itself with kaldi-native-fbank; the NeMo transducer path
(``offline-recognizer-transducer-nemo-impl.h``, ``PostInit``) fixes every option but the number of bins
(the encoder's ``feat_dim`` metadata) and the normalisation (its ``normalize_type``): 16 kHz audio in
[-1, 1], 25 ms frames every 10 ms (``snip_edges=false``: (S + 80) // 160 frames of S samples), no DC
removal, pre-emphasis 0.97 inside each frame, Povey window (hann^0.85) zero-padded to a 512-point FFT,
power spectrum, librosa's mel filters (slaney scale and area normalisation) from 0 Hz to 7600 Hz (Nyquist
- 400), natural log floored at float32's epsilon, then per-bin standardisation over the utterance when
``normalize_type`` is "per_feature" (nothing when it is empty). `KALDI_FBANK_OPTIONS` are those settings as
kaldi-native-fbank's ``FbankOptions`` fields (the tests compute sherpa's features with them).

`SherpaFbank` (the training front end of kind "sherpa") computes these features in torch, `SherpaOnlineFbank`
(kind "sherpa_online") those of sherpa-onnx's online recogniser; the export to sherpa-onnx reads its settings
from here too.
"""

from __future__ import annotations

import torch
import torchaudio
from torch import nn

# sherpa-onnx's features for a NeMo transducer (kaldi-native-fbank with the options its
# offline-recognizer-transducer-nemo-impl.h fixes, see above)
SHERPA_SAMPLE_RATE = 16000
SHERPA_HOP_LENGTH = 160  # 10 ms
SHERPA_WIN_LENGTH = 400  # 25 ms
SHERPA_N_FFT = 512  # the window rounded up to a power of two
SHERPA_PREEMPHASIS = 0.97
SHERPA_LOW_FREQ = 0.0
SHERPA_HIGH_FREQ = SHERPA_SAMPLE_RATE / 2 - 400.0  # sherpa's high_freq = -400, an offset from Nyquist
SHERPA_LOG_FLOOR = float(torch.finfo(torch.float32).eps)  # kaldi-native-fbank's floor before the log
SHERPA_STD_FLOOR = 1e-5  # sherpa's per_feature normalisation: (x - mean) / (std + 1e-5)
SHERPA_NORMALIZATIONS = ("per_feature", None)  # None: sherpa's normalize_type "" (raw log filterbank)
# sherpa-onnx's OnlineRecognizer sets other options for a NeMo transducer
# (online-recognizer-transducer-nemo-impl.h, PostInit): a Hann window and mel filters up to Nyquist
SHERPA_ONLINE_HIGH_FREQ = SHERPA_SAMPLE_RATE / 2


def povey_window(length: int = SHERPA_WIN_LENGTH) -> torch.Tensor:
    """(length,) float64 Kaldi's Povey window, (0.5 - 0.5 cos(2 pi n / (length - 1)))^0.85."""
    n = torch.arange(length, dtype=torch.float64)
    return (0.5 - 0.5 * torch.cos(2 * torch.pi * n / (length - 1))).pow(0.85)


def hann_window(length: int = SHERPA_WIN_LENGTH) -> torch.Tensor:
    """(length,) float64 kaldi-native-fbank's "hann" window, the periodic one: 0.5 - 0.5 cos(2 pi n / length)."""
    n = torch.arange(length, dtype=torch.float64)
    return 0.5 - 0.5 * torch.cos(2 * torch.pi * n / length)


def sherpa_mel_filters(
    num_bins: int, frequencies: int = SHERPA_N_FFT // 2 + 1, high_freq: float = SHERPA_HIGH_FREQ
) -> torch.Tensor:
    """(frequencies, num_bins) float64 sherpa's mel filters (kaldi-native-fbank's ``is_librosa``: librosa's
    slaney scale and area normalisation, 0 Hz to `high_freq`: 7600 Hz offline, 8000 Hz in sherpa's online
    recogniser) sampled at `frequencies` points from 0 Hz to Nyquist."""
    return torchaudio.functional.melscale_fbanks(
        frequencies,
        SHERPA_LOW_FREQ,
        high_freq,
        num_bins,
        SHERPA_SAMPLE_RATE,
        norm="slaney",
        mel_scale="slaney",
    ).double()


def normalize_per_feature(features: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """(B, T, F) features standardised per bin over each utterance's (B,) valid frames, as sherpa-onnx's
    "per_feature" (population variance, (x - mean) / (std + 1e-5)); padded frames 0.

    Computed two-pass in float64 (mean, then the mean of (x - mean)^2), which is what sherpa-onnx >= 1.13.5
    computes in float32 (before it, E[x^2] - E[x]^2 cancelled to 0 in bins pinned at the log floor). float64
    makes the result independent of summation order: a bin at the log floor in every frame (digital silence,
    band-limited audio) has std 0 and (x - mean) / 1e-5 would turn float32 rounding of the mean into
    values of 0.1; here its mean is exact and it normalises to exactly 0, in training and in the exported
    encoder alike (`asr_plugin.export.feature_adapter.SherpaFeatures` calls this function).
    """
    keep = (torch.arange(features.shape[1], device=features.device) < frames[:, None]).unsqueeze(-1)  # (B, T, 1)
    x = features.double()
    count = frames.to(x.dtype)[:, None, None]
    mean = torch.where(keep, x, 0.0).sum(1, keepdim=True) / count  # (B, 1, F)
    centred = torch.where(keep, x - mean, 0.0)
    std = (centred.square().sum(1, keepdim=True) / count).sqrt()
    return (centred / (std + SHERPA_STD_FLOOR)).to(features.dtype)


class SherpaFbank(nn.Module):
    """The features sherpa-onnx computes for a ``model_type="nemo_transducer"`` model, on a batch: (B, S) 16 kHz
    audio in [-1, 1], (B,) sample counts -> (B, T, F) float32 features (padded frames 0) and (B,) frame counts.

    kaldi-native-fbank's algorithm with sherpa's options, vectorised: frame m covers samples
    160 m - 120 ... 160 m + 279 (``snip_edges=false``: centred on 160 m + 80, samples outside the utterance
    reflected at its ends), so S samples give (S + 80) // 160 frames; each frame is pre-emphasised inside
    itself (x[i] - 0.97 x[i-1], x[0] (1 - 0.97)), Povey-windowed, zero-padded to 512 points, its power spectrum
    summed by `sherpa_mel_filters`, log(max(energy, float32 eps)); no DC removal, no dither. Then, with
    `normalize` "per_feature", NeMo's/sherpa's per-utterance standardisation of each bin
    (`normalize_per_feature`); None leaves the log filterbank.

    A model trained on these features is exported with sherpa's raw log filterbank as input
    (``normalize_type`` "") and `normalize_per_feature` at the start of its encoder, so in sherpa-onnx it sees
    what it was trained on (float32 rounding of the filterbank apart, about 1e-4), whatever sherpa-onnx's own
    normalisation code does in a given version.

    Args:
        num_mel_bins: F, written as the encoder's ``feat_dim``.
        normalize: "per_feature" or None (sherpa's normalize_type "").
        dither: std of Gaussian noise added to the audio in training mode only (sherpa adds none, so
            evaluation mode is exact); 0 disables it.
    """

    sample_rate = SHERPA_SAMPLE_RATE
    hop_length = SHERPA_HOP_LENGTH

    def __init__(self, num_mel_bins: int = 80, normalize: str | None = "per_feature", dither: float = 0.0):
        super().__init__()
        if normalize not in SHERPA_NORMALIZATIONS:
            raise ValueError(f"normalize={normalize!r}; sherpa-onnx implements {SHERPA_NORMALIZATIONS}")
        if not (isinstance(num_mel_bins, int) and num_mel_bins > 0):
            raise ValueError(f"num_mel_bins={num_mel_bins!r} must be a positive integer")
        if not dither >= 0:
            raise ValueError(f"dither={dither!r} must be >= 0")
        self.num_mel_bins = num_mel_bins
        self.normalize = normalize
        self.dither = dither
        self.register_buffer("window", povey_window().float(), persistent=False)
        self.register_buffer("fbank", sherpa_mel_filters(num_mel_bins).float(), persistent=False)
        offsets = torch.arange(SHERPA_WIN_LENGTH) + SHERPA_HOP_LENGTH // 2 - SHERPA_WIN_LENGTH // 2
        self.register_buffer("offsets", offsets, persistent=False)  # frame 0's samples: -120 ... 279

    def num_frames(self, num_samples: torch.Tensor) -> torch.Tensor:
        """(B,) sample counts -> (B,) int64 frames, Kaldi's count without snipped edges."""
        return torch.div(num_samples + SHERPA_HOP_LENGTH // 2, SHERPA_HOP_LENGTH, rounding_mode="floor").long()

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Raises ValueError naming the utterance when it has no frame (fewer than 80 samples)."""
        if audio.ndim != 2 or lengths.shape != audio.shape[:1]:
            raise ValueError(
                f"audio must be (B, S) with lengths (B,), got {tuple(audio.shape)} and {tuple(lengths.shape)}"
            )
        lengths = lengths.to(audio.device).long()
        frames = self.num_frames(lengths)
        if bool((frames < 1).any()):
            index = int((frames < 1).nonzero()[0])
            raise ValueError(
                f"utterance {index} has {int(lengths[index])} samples; sherpa-onnx's features need at least "
                f"{SHERPA_HOP_LENGTH // 2} (one frame)"
            )
        x = audio.float()
        if self.training and self.dither > 0:
            x = x + self.dither * torch.randn_like(x)
        num_frames = int(frames.max())
        zeros = torch.zeros_like(lengths)
        features = self.log_fbank(self.frame_windows(x, zeros, zeros, num_frames, lengths))  # (B, T, F)
        if self.normalize == "per_feature":
            return normalize_per_feature(features, frames), frames
        keep = (torch.arange(num_frames, device=x.device) < frames[:, None]).unsqueeze(-1)  # (B, T, 1)
        return features.masked_fill(~keep, 0.0), frames

    def frame_windows(
        self,
        samples: torch.Tensor,
        samples_start: torch.Tensor,
        first_frame: torch.Tensor,
        num_frames: int,
        total_samples: torch.Tensor,
    ) -> torch.Tensor:
        """(B, T, W) the samples of frames ``first_frame[b] + j`` (j < T = `num_frames`) of utterances of
        ``total_samples[b]`` samples, read from `samples` (B, L), whose column 0 is sample ``samples_start[b]``.

        Kaldi's reflection at the utterance's ends (repeated: -1 -> 0, S -> S - 1) is the mirror image with
        period 2 S; a frame must lie in what `samples` holds after reflection (the caller asks for frames
        that do; frames past an utterance's last one read clamped garbage, to be masked)."""
        frame = first_frame[:, None, None] + torch.arange(num_frames, device=samples.device)[None, :, None]
        index = frame * SHERPA_HOP_LENGTH + self.offsets  # (B, T, W) absolute sample indices
        period = 2 * total_samples.clamp(min=1)[:, None, None]  # (B, 1, 1)
        index = torch.remainder(index, period)  # in [0, 2 S)
        index = torch.where(index >= total_samples[:, None, None], period - 1 - index, index)
        index = (index - samples_start[:, None, None]).clamp(0, max(samples.shape[1] - 1, 0))
        if samples.shape[1] == 0:
            return samples.new_zeros(*index.shape)
        batch = samples.shape[0]
        return torch.gather(samples, 1, index.reshape(batch, -1)).reshape(batch, num_frames, SHERPA_WIN_LENGTH)

    def log_fbank(self, windows: torch.Tensor) -> torch.Tensor:
        """(..., W) frames of samples -> (..., F) float32 log mel energies: pre-emphasis inside each frame,
        the window, a 512-point power spectrum, the mel filters, log(max(energy, float32 eps))."""
        windows = torch.cat(
            [windows[..., :1] * (1 - SHERPA_PREEMPHASIS), windows[..., 1:] - SHERPA_PREEMPHASIS * windows[..., :-1]],
            dim=-1,
        )
        spectrum = torch.fft.rfft(windows * self.window, n=SHERPA_N_FFT)  # (..., 257)
        power = spectrum.real.square() + spectrum.imag.square()
        return torch.matmul(power, self.fbank).clamp_min(SHERPA_LOG_FLOOR).log()


class SherpaOnlineFbank(SherpaFbank):
    """The features sherpa-onnx's *online* recogniser computes for a NeMo transducer (a cache-aware streaming
    model): (B, S) 16 kHz audio in [-1, 1], (B,) sample counts -> (B, T, F) float32 raw log filterbank (padded
    frames 0) and (B,) frame counts.

    `SherpaFbank`'s algorithm and framing ((S + 80) // 160 frames, edges reflected, pre-emphasis 0.97 inside
    each frame, no DC removal, no dither, 512-point power spectrum, librosa's slaney mel filters, log floored at
    float32 eps) with the options ``OnlineRecognizerTransducerNeMoImpl::PostInit`` sets instead of the offline
    ones: kaldi-native-fbank's periodic Hann window (`hann_window`) and filters from 0 Hz to 8000 Hz (Nyquist),
    and no normalisation at all (sherpa-onnx's online stream never applies the model's ``normalize_type``).
    With no per-utterance statistics these features can be computed as audio arrives
    (`asr_plugin.frontend.online.fbank.StreamingFbank` gives exactly these frames piece by piece).

    Args:
        num_mel_bins: F, the model's ``feat_dim``.
        dither: std of Gaussian noise added to the audio in training mode only (sherpa adds none).
    """

    def __init__(self, num_mel_bins: int = 80, dither: float = 0.0):
        super().__init__(num_mel_bins=num_mel_bins, normalize=None, dither=dither)
        self.window = hann_window().float()
        self.fbank = sherpa_mel_filters(num_mel_bins, high_freq=SHERPA_ONLINE_HIGH_FREQ).float()


KALDI_FBANK_OPTIONS = {
    "frame_opts": {
        "samp_freq": SHERPA_SAMPLE_RATE,
        "frame_shift_ms": 10.0,
        "frame_length_ms": 25.0,
        "dither": 0.0,
        "preemph_coeff": SHERPA_PREEMPHASIS,
        "remove_dc_offset": False,
        "window_type": "povey",
        "round_to_power_of_two": True,
        "snip_edges": False,
    },
    "mel_opts": {"low_freq": SHERPA_LOW_FREQ, "high_freq": -400.0, "is_librosa": True},
}


def sherpa_num_frames(num_samples: int) -> int:
    """Frames sherpa computes for `num_samples` samples (Kaldi's count without snipped edges)."""
    return (num_samples + SHERPA_HOP_LENGTH // 2) // SHERPA_HOP_LENGTH
