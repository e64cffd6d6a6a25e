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
"""

from __future__ import annotations

import torch
import torchaudio

SAMPLE_RATE = 16000
HOP_LENGTH = 160  # 10 ms
WIN_LENGTH = 400  # 25 ms
N_FFT = 512  # the window rounded up to a power of two
PREEMPHASIS = 0.97
LOW_FREQ = 0.0
HIGH_FREQ = SAMPLE_RATE / 2 - 400.0  # FeatureExtractorConfig.high_freq = -400, an offset from Nyquist
LOG_FLOOR = float(torch.finfo(torch.float32).eps)  # kaldi-native-fbank's log floor

KALDI_FBANK_OPTIONS = {
    "frame_opts": {
        "samp_freq": SAMPLE_RATE,
        "frame_shift_ms": 10.0,
        "frame_length_ms": 25.0,
        "dither": 0.0,
        "preemph_coeff": PREEMPHASIS,
        "remove_dc_offset": False,
        "window_type": "povey",
        "round_to_power_of_two": True,
        "snip_edges": False,
    },
    "mel_opts": {"low_freq": LOW_FREQ, "high_freq": -400.0, "is_librosa": True},
}


def povey_window(length: int = WIN_LENGTH) -> torch.Tensor:
    """(length,) float64 Kaldi's Povey window, (0.5 - 0.5 cos(2 pi n / (length - 1)))^0.85."""
    n = torch.arange(length, dtype=torch.float64)
    return (0.5 - 0.5 * torch.cos(2 * torch.pi * n / (length - 1))).pow(0.85)


def sherpa_mel_filters(num_bins: int, frequencies: int) -> torch.Tensor:
    """(frequencies, num_bins) float64 sherpa's mel filters sampled at `frequencies` points from 0 Hz to Nyquist."""
    return torchaudio.functional.melscale_fbanks(
        frequencies,
        LOW_FREQ,
        HIGH_FREQ,
        num_bins,
        SAMPLE_RATE,
        norm="slaney",
        mel_scale="slaney",
    ).double()


def sherpa_num_frames(num_samples: int) -> int:
    """Frames sherpa computes for `num_samples` samples (Kaldi's count without snipped edges)."""
    return (num_samples + HOP_LENGTH // 2) // HOP_LENGTH
