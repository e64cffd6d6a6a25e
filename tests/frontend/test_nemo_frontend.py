"""`NemoMelFrontend`, built by the importer from a NeMo ``preprocessor`` section, against NeMo's own
``AudioToMelSpectrogramPreprocessor``: one test per setting the importer accepts (skipped without NeMo).

Each setting is applied to the preprocessor of NeMo's example configs (`benchmarks.nemo_examples`);
both front ends see the same batch of three short utterances of different lengths, in eval mode (no dither).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("nemo.collections.asr")
pytestmark = pytest.mark.nemo

from nemo.collections.asr.modules import AudioToMelSpectrogramPreprocessor  # noqa: E402

from asr_plugin.formats.nemo.config import frontend_kwargs  # noqa: E402
from asr_plugin.frontend.nemo import NemoMelFrontend  # noqa: E402
from benchmarks.nemo_compare import speech_like_audio  # noqa: E402
from benchmarks.nemo_examples import nemo_config  # noqa: E402

SETTINGS = {
    "example config": {},
    "20 ms window": {"window_size": 0.02},
    "20 ms hop": {"window_stride": 0.02},
    "window and hop in samples": {
        "window_size": None,
        "window_stride": None,
        "n_window_size": 384,
        "n_window_stride": 128,
    },
    "n_fft 1024": {"n_fft": 1024},
    "n_fft from the window": {"n_fft": None},
    "64 mel bins": {"features": 64},
    "128 mel bins": {"features": 128},
    "no pre-emphasis": {"preemph": None},
    "pre-emphasis 0.9": {"preemph": 0.9},
    "lowfreq and highfreq": {"lowfreq": 60, "highfreq": 7200},
    "log guard tiny": {"log_zero_guard_value": "tiny"},
    "log guard eps": {"log_zero_guard_value": "eps"},
    "log guard 1e-5": {"log_zero_guard_value": 1e-5},
    "log guard clamp": {"log_zero_guard_type": "clamp", "log_zero_guard_value": 1e-5},
    "pad_to 16": {"pad_to": 16},
    "hamming window": {"window": "hamming"},
    "blackman window": {"window": "blackman"},
    "bartlett window": {"window": "bartlett"},
    "normalize all_features": {"normalize": "all_features"},
    "no normalisation": {"normalize": None},
    "magnitude spectrum": {"mag_power": 1.0},
    "no log": {"log": False, "normalize": None},
    "mel_norm null": {"mel_norm": None},
    "8 kHz audio": {"sample_rate": 8000},
}


def _front_ends(setting: dict) -> tuple[torch.nn.Module, NemoMelFrontend]:
    section = {**nemo_config("conformer_transducer", "unused")["preprocessor"], **setting}
    options = {key: value for key, value in section.items() if key != "_target_"}
    return AudioToMelSpectrogramPreprocessor(**options).eval(), NemoMelFrontend(
        **frontend_kwargs({"preprocessor": section})
    )


def _assert_same_features(nemo: torch.nn.Module, ours: NemoMelFrontend, audio, lengths) -> None:
    with torch.no_grad():
        reference, reference_lengths = nemo(input_signal=audio, length=lengths)  # (B, F, T')
        features, feature_lengths = ours(audio, lengths)  # (B, T, F)
    assert feature_lengths.tolist() == reference_lengths.tolist()
    assert features.shape[1] == int(feature_lengths.max())
    scale = float(reference.abs().max())
    for b, n in enumerate(feature_lengths.tolist()):
        torch.testing.assert_close(features[b, :n], reference[b, :, :n].T, rtol=1e-4, atol=2e-4 * max(1.0, scale / 10))
        assert torch.all(features[b, n:] == 0.0)


@pytest.mark.parametrize("setting", list(SETTINGS.values()), ids=list(SETTINGS))
def test_features_match_nemo(setting: dict) -> None:
    nemo, ours = _front_ends(setting)
    _assert_same_features(nemo, ours.eval(), *speech_like_audio([12000, 8123, 3301]))


def test_dither_zero_matches_nemo_in_training_mode() -> None:
    nemo, ours = _front_ends({"dither": 0.0})
    _assert_same_features(nemo.train(), ours.train(), *speech_like_audio([12000, 8123, 3301]))


def test_dither_is_training_only() -> None:
    _, ours = _front_ends({"dither": 1e-5})
    audio, lengths = speech_like_audio([12000, 8123])
    assert torch.equal(ours.eval()(audio, lengths)[0], ours(audio, lengths)[0])
    assert not torch.equal(ours.train()(audio, lengths)[0], ours.eval()(audio, lengths)[0])
