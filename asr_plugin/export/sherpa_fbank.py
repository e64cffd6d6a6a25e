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

The constants and filters live in `asr_plugin.data.features`, whose `SherpaFbank` (the training front end of
kind "sherpa") computes these features in torch; they are re-exported here under their short names.
"""

from __future__ import annotations

from asr_plugin.data.features import SHERPA_HIGH_FREQ as HIGH_FREQ
from asr_plugin.data.features import SHERPA_HOP_LENGTH as HOP_LENGTH
from asr_plugin.data.features import SHERPA_LOG_FLOOR as LOG_FLOOR
from asr_plugin.data.features import SHERPA_LOW_FREQ as LOW_FREQ
from asr_plugin.data.features import SHERPA_N_FFT as N_FFT
from asr_plugin.data.features import SHERPA_PREEMPHASIS as PREEMPHASIS
from asr_plugin.data.features import SHERPA_SAMPLE_RATE as SAMPLE_RATE
from asr_plugin.data.features import SHERPA_WIN_LENGTH as WIN_LENGTH
from asr_plugin.data.features import povey_window, sherpa_mel_filters

__all__ = [
    "HIGH_FREQ",
    "HOP_LENGTH",
    "KALDI_FBANK_OPTIONS",
    "LOG_FLOOR",
    "LOW_FREQ",
    "N_FFT",
    "PREEMPHASIS",
    "SAMPLE_RATE",
    "WIN_LENGTH",
    "povey_window",
    "sherpa_mel_filters",
    "sherpa_num_frames",
]

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


def sherpa_num_frames(num_samples: int) -> int:
    """Frames sherpa computes for `num_samples` samples (Kaldi's count without snipped edges)."""
    return (num_samples + HOP_LENGTH // 2) // HOP_LENGTH
