"""Log-mel shapes and frame counts, feature statistics and their normalisation."""

from __future__ import annotations

import pytest
import torch

from asr_plugin.frontend import FeatureStats, GlobalNormalize, LogMelFeatures


@pytest.mark.parametrize("num_samples", [1, 159, 160, 161, 400, 16000, 16079, 35_123])
def test_frame_count_formula(num_samples):
    featurizer = LogMelFeatures()
    features = featurizer(torch.randn(num_samples))
    assert features.shape == (num_samples // 160 + 1, 80)
    assert featurizer.num_frames(num_samples) == num_samples // 160 + 1
    assert features.dtype == torch.float32


def test_batched_and_silent_input():
    featurizer = LogMelFeatures(num_mel_bins=40, log_floor=1e-6)
    waves = torch.randn(3, 8000)
    batch = featurizer(waves)
    assert batch.shape == (3, 51, 40)
    torch.testing.assert_close(batch[1], featurizer(waves[1]))
    silent = featurizer(torch.zeros(1600))
    assert torch.isfinite(silent).all()
    torch.testing.assert_close(silent, torch.full_like(silent, torch.tensor(1e-6).log().item()))
    assert featurizer.win_length == 400 and featurizer.hop_length == 160


def test_stats_from_sums_save_load_and_normalise(tmp_path):
    frames = torch.randn(1000, 80, dtype=torch.float64) * 3 + 5
    stats = FeatureStats.from_sums(frames.sum(0), frames.square().sum(0), frames.shape[0])
    torch.testing.assert_close(stats.mean, frames.mean(0).float())
    torch.testing.assert_close(stats.std, frames.std(0, unbiased=False).float())
    loaded = FeatureStats.load(stats.save(tmp_path / "stats.json"))
    torch.testing.assert_close(loaded.mean, stats.mean)
    assert loaded.num_frames == 1000
    normalised = GlobalNormalize(loaded)(frames.float())
    torch.testing.assert_close(normalised.mean(0), torch.zeros(80), atol=1e-4, rtol=0)
    torch.testing.assert_close(normalised.std(0, unbiased=False), torch.ones(80), atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="last dim 40"):
        GlobalNormalize(loaded)(torch.zeros(5, 40))


def test_bad_stats_file(tmp_path):
    (tmp_path / "bad.json").write_text('{"mean": [0.0], "std": [0.0], "num_frames": 3}')
    with pytest.raises(ValueError, match="bad.json"):
        FeatureStats.load(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{")
    with pytest.raises(ValueError, match="junk.json: not a feature stats file"):
        FeatureStats.load(tmp_path / "junk.json")
    with pytest.raises(ValueError, match="num_frames"):
        FeatureStats.from_sums(torch.zeros(2), torch.zeros(2), 0)
