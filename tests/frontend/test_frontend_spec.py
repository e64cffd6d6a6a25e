"""Front-end specs: completion and checks, `build_frontend` against torchaudio and NemoMelFrontend, batched
equals per-utterance, the spec as checkpoint data."""

from __future__ import annotations

import io

import pytest
import torch
import torchaudio

from asr_plugin.frontend import (
    FeatureStats,
    LogMelFrontend,
    NemoMelFrontend,
    build_frontend,
    complete_frontend_spec,
    frontend_feature_dim,
    frontend_needs_stats,
    with_stats,
)

BINS = 16
MEAN, STD = [float(i) / 4 - 2 for i in range(BINS)], [1.0 + i / 10 for i in range(BINS)]
LOGMEL = {"kind": "logmel", "options": {"num_mel_bins": BINS}, "mean": MEAN, "std": STD}


def test_completion_fills_every_default():
    spec = complete_frontend_spec({"kind": "logmel"})
    assert spec == {
        "kind": "logmel",
        "options": {"sample_rate": 16000, "num_mel_bins": 80, "window_ms": 25.0, "hop_ms": 10.0, "log_floor": 1e-6},
        "mean": None,
        "std": None,
    }
    assert frontend_needs_stats(spec) and frontend_feature_dim(spec) == 80
    nemo = complete_frontend_spec({"kind": "nemo", "options": {"num_mel_bins": 128, "dither": 0.0}})
    assert nemo["options"] == {
        "sample_rate": 16000,
        "num_mel_bins": 128,
        "n_fft": 512,
        "win_length": 400,
        "hop_length": 160,
        "preemphasis": 0.97,
        "dither": 0.0,
        "log_guard": 2.0**-24,
        "f_min": 0.0,
        "f_max": None,
        "window": "hann",
        "normalize": "per_feature",
        "mag_power": 2.0,
        "log": True,
        "log_guard_type": "add",
        "mel_norm": "slaney",
    }
    assert not frontend_needs_stats(nemo) and frontend_feature_dim(nemo) == 128
    assert complete_frontend_spec(nemo) == nemo  # idempotent


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "mfcc"}, "kind must be one of"),
        ([1, 2], "must be a mapping"),
        ({"kind": "nemo", "mean": [0.0]}, r"unknown key\(s\) \['mean'\]"),
        ({"kind": "nemo", "options": {"n_mels": 80}}, r"unknown option\(s\) \['n_mels'\]"),
        ({"kind": "logmel", "options": {"num_mel_bins": "80"}}, "num_mel_bins must be a number"),
        ({"kind": "logmel", "mean": [0.0] * 80}, "both mean and std"),
        ({"kind": "logmel", "mean": [0.0] * 3, "std": [1.0] * 3}, "mean has 3 values, num_mel_bins is 80"),
        (
            {"kind": "logmel", "options": {"num_mel_bins": 2}, "mean": [0.0] * 2, "std": [1.0, 0.0]},
            "std must be positive",
        ),
    ],
)
def test_bad_specs_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        complete_frontend_spec(spec)


def test_logmel_frontend_is_torchaudio_melspectrogram_then_global_normalisation():
    torch.manual_seed(0)
    audio = torch.randn(3200)
    features, frames = build_frontend(LOGMEL)(audio[None], torch.tensor([3200]))
    mel = torchaudio.transforms.MelSpectrogram(
        16000, n_fft=512, win_length=400, hop_length=160, n_mels=BINS, center=True, pad_mode="constant", power=2.0
    ).double()(audio.double())
    mean, std = torch.tensor(MEAN, dtype=torch.float64), torch.tensor(STD, dtype=torch.float64)
    expected = (mel.clamp_min(1e-6).log().T - mean) / std
    assert int(frames) == 3200 // 160 + 1 == features.shape[1]
    torch.testing.assert_close(features[0].double(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("spec", [LOGMEL, {"kind": "nemo", "options": {"num_mel_bins": BINS}}])
def test_a_batch_gives_each_utterance_its_own_features(spec):
    torch.manual_seed(1)
    frontend = build_frontend(spec).eval()
    lengths = torch.tensor([4000, 2550, 1000])
    audio = torch.randn(3, 4000) * (torch.arange(4000) < lengths[:, None])
    batch, frames = frontend(audio, lengths)
    for b, length in enumerate(lengths.tolist()):
        alone, alone_frames = frontend(audio[b : b + 1, :length], lengths[b : b + 1])
        assert int(alone_frames) == int(frames[b])
        torch.testing.assert_close(batch[b, : int(frames[b])], alone[0], rtol=1e-4, atol=1e-4)
        assert (batch[b, int(frames[b]) :] == 0).all()


def test_nemo_spec_builds_nemo_mel_frontend_with_dither_in_training_only():
    options = {"num_mel_bins": BINS, "dither": 1e-2}
    frontend = build_frontend({"kind": "nemo", "options": options})
    assert isinstance(frontend, NemoMelFrontend) and frontend.training
    audio, lengths = torch.randn(1, 3200), torch.tensor([3200])
    reference = NemoMelFrontend(**options).eval()(audio, lengths)[0]
    torch.testing.assert_close(frontend.eval()(audio, lengths)[0], reference)
    torch.testing.assert_close(frontend(audio, lengths)[0], reference)  # eval: deterministic
    assert not torch.allclose(frontend.train()(audio, lengths)[0], reference, atol=1e-3)


def test_with_stats_and_the_spec_as_checkpoint_data():
    stats = FeatureStats(torch.tensor(MEAN), torch.tensor(STD), num_frames=100)
    spec = with_stats({"kind": "logmel", "options": {"num_mel_bins": BINS}}, stats)
    assert spec["mean"] == pytest.approx(MEAN) and not frontend_needs_stats(spec)
    buffer = io.BytesIO()
    torch.save({"frontend": spec}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)["frontend"]
    assert loaded == spec and isinstance(build_frontend(loaded), LogMelFrontend)
    with pytest.raises(ValueError, match="no mean/std"):
        build_frontend({"kind": "logmel"})
    with pytest.raises(ValueError, match="only a 'logmel'"):
        with_stats({"kind": "nemo"}, stats)
