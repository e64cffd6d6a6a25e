"""SpecAugment (masks, time warp) in train vs eval, speed perturbation."""

from __future__ import annotations

import pytest
import torch

from asr_plugin.data import SpecAugment, speed_perturb


def _batch():
    features = torch.randn(3, 200, 80) + 10.0  # never 0, so masked cells are recognisable
    lengths = torch.tensor([200, 120, 37])
    for b, length in enumerate(lengths):
        features[b, length:] = 0.0
    return features, lengths


def test_specaugment_eval_is_identity():
    augment = SpecAugment().eval()
    features, lengths = _batch()
    assert augment(features, lengths) is features


def test_specaugment_train_masks_inside_lengths_only():
    torch.manual_seed(0)
    augment = SpecAugment(
        num_freq_masks=2, freq_mask_width=15, num_time_masks=4, time_mask_width=20, max_time_mask_ratio=0.1
    ).train()
    features, lengths = _batch()
    original = features.clone()
    out = augment(features, lengths)
    torch.testing.assert_close(features, original)  # the input is not modified
    assert out.shape == features.shape
    for b, length in enumerate(lengths.tolist()):
        valid, pad = out[b, :length], out[b, length:]
        assert (pad == 0).all()
        masked = valid == 0
        assert masked.any()
        # masks are whole rows (time) or whole columns (frequency)
        full_cols = masked.all(0)
        full_rows = masked.all(1)
        assert (masked == (full_cols.unsqueeze(0) | full_rows.unsqueeze(1))).all()
        assert full_cols.sum() <= 2 * 15
        assert full_rows.sum() <= 4 * max(1, int(length * 0.1))


def test_specaugment_is_seeded_and_configurable():
    features, lengths = _batch()
    augment = SpecAugment().train()
    torch.manual_seed(3)
    first = augment(features, lengths)
    torch.manual_seed(3)
    torch.testing.assert_close(augment(features, lengths), first)
    off = SpecAugment(num_freq_masks=0, num_time_masks=0).train()
    torch.testing.assert_close(off(features, lengths), features)
    with pytest.raises(ValueError, match="num_time_masks"):
        SpecAugment(num_time_masks=-1)
    with pytest.raises(ValueError, match="max_time_mask_ratio"):
        SpecAugment(max_time_mask_ratio=0.0)
    with pytest.raises(ValueError, match=r"\(B, T, F\)"):
        augment(features[0], lengths)
    with pytest.raises(ValueError, match="time_warp"):
        SpecAugment(time_warp=-1)


def _mean_masked_frames(augment, lengths, draws=400):
    """Mean number of fully masked frames per utterance over `draws` batches (one time mask, no freq mask)."""
    features = torch.ones(len(lengths), int(lengths.max()), 4)
    total = torch.zeros(len(lengths))
    for _ in range(draws):
        total += (augment(features, lengths) == 0).all(-1).sum(1)
    return total / draws


def test_time_mask_width_is_a_fraction_of_each_utterance():
    torch.manual_seed(0)
    lengths = torch.tensor([1000, 100])
    ratio_only = SpecAugment(num_freq_masks=0, num_time_masks=1, time_mask_width=None, max_time_mask_ratio=0.1).train()
    # width = floor(u * floor(0.1 * T_b)): mean (M - 1) / 2 for M = 100 and 10 (torchaudio's TimeMasking per
    # utterance draws the same); one batch masks both utterances with their own M
    torch.testing.assert_close(_mean_masked_frames(ratio_only, lengths), torch.tensor([49.5, 4.5]), atol=4.0, rtol=0)
    capped = SpecAugment(num_freq_masks=0, num_time_masks=1, time_mask_width=20, max_time_mask_ratio=0.1).train()
    torch.testing.assert_close(_mean_masked_frames(capped, lengths), torch.tensor([9.5, 4.5]), atol=1.0, rtol=0)


def test_frequency_masks_hit_every_frame_of_an_utterance_and_differ_between_utterances():
    torch.manual_seed(1)
    augment = SpecAugment(num_freq_masks=1, freq_mask_width=30, num_time_masks=0).train()
    features, lengths = _batch()
    out = augment(features, lengths)
    columns = [(out[b, :length] == 0).all(0) for b, length in enumerate(lengths.tolist())]
    assert all(int(c.sum()) < 30 for c in columns)
    assert len({tuple(c.nonzero().flatten().tolist()) for c in columns}) > 1  # drawn per utterance


def test_time_warp_moves_frames_monotonically_and_keeps_ends_and_padding():
    torch.manual_seed(2)
    lengths = torch.tensor([200, 120, 9])
    ramp = torch.arange(200, dtype=torch.float32)[None, :, None].repeat(3, 1, 2)  # frame t holds t
    for b, length in enumerate(lengths.tolist()):
        ramp[b, length:] = -1.0
    warp = SpecAugment(num_freq_masks=0, num_time_masks=0, time_warp=10).train()
    moved = 0
    for _ in range(20):
        out = warp(ramp, lengths)
        for b, length in enumerate(lengths.tolist()):
            values = out[b, :length, 0]
            assert values[0] == 0 and values[-1] == pytest.approx(length - 1)  # the ends stay
            assert (values[1:] >= values[:-1]).all()  # time order is kept
            assert ((values - torch.arange(length)).abs() <= 10 + 1e-4).all()  # no frame moves by more than W
            assert (out[b, length:] == -1.0).all()
            moved += int(not torch.equal(values, torch.arange(length, dtype=torch.float32)))
        assert torch.equal(out[2], ramp[2])  # 9 frames <= 2 W: left alone
    assert moved >= 30  # the two long utterances are warped almost every time (w = 0 happens 1 in 21)


@pytest.mark.parametrize("factor", [0.9, 1.0, 1.1])
def test_speed_perturb_length(factor):
    wave = torch.randn(16000)
    out = speed_perturb(wave, factor, 16000)
    assert abs(out.shape[0] - 16000 / factor) <= 2
    with pytest.raises(ValueError, match="speed factor"):
        speed_perturb(wave, 0.0, 16000)
