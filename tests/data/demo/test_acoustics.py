"""Room, noise and level of the mini corpus: what `degrade` promises, checked on known signals."""

from __future__ import annotations

import numpy as np
import pytest

from asr_plugin.data.demo.acoustics import Acoustics, add_noise, coloured_noise, degrade, room_impulse_response


def test_room_impulse_response_has_unit_direct_path_and_asked_direct_to_reverb_ratio():
    response = room_impulse_response(np.random.default_rng(0), 16000, rt60=0.3, direct_to_reverb_db=6.0)
    assert response.shape == (4800,) and response[0] == 1.0
    ratio_db = 10 * np.log10(1.0 / np.sum(response[1:] ** 2))
    assert ratio_db == pytest.approx(6.0, abs=1e-6)
    early, late = np.abs(response[1:1600]).mean(), np.abs(response[3200:]).mean()
    assert late < early / 10  # it decays


def test_coloured_noise_length_and_spectral_tilt():
    white_ish = [coloured_noise(np.random.default_rng(seed), 16000) for seed in range(20)]
    assert all(noise.shape == (16000,) for noise in white_ish)
    # over many draws the exponent spans white to brown: some draws put far more energy low than high
    ratios = []
    for noise in white_ish:
        power = np.abs(np.fft.rfft(noise)) ** 2
        ratios.append(power[:800].mean() / power[-800:].mean())
    assert min(ratios) < 10 < max(ratios)


def test_add_noise_sets_the_signal_to_noise_ratio():
    rng = np.random.default_rng(0)
    signal, noise = rng.standard_normal(8000), 3.0 * rng.standard_normal(8000)
    mixed = add_noise(signal, noise, snr_db=15.0)
    added = mixed - signal
    assert 10 * np.log10(np.mean(signal**2) / np.mean(added**2)) == pytest.approx(15.0, abs=1e-9)
    assert np.allclose(added / noise, added[0] / noise[0])  # the noise is only scaled


def test_degrade_keeps_length_sets_level_and_is_deterministic():
    t = np.arange(16000) / 16000
    speech = 0.5 * np.sin(2 * np.pi * 300 * t)
    for seed in range(6):  # half of them reverberate with the default settings
        out = degrade(speech, 16000, np.random.default_rng(seed))
        assert out.shape == speech.shape and np.isfinite(out).all()
        assert 10 ** (-12 / 20) - 1e-12 <= np.max(np.abs(out)) <= 10 ** (-1 / 20) + 1e-12
        assert np.array_equal(out, degrade(speech, 16000, np.random.default_rng(seed)))
    fixed = Acoustics(reverb_probability=0.0, snr_db=(20.0, 20.0), level_db=(-6.0, -6.0))
    out = degrade(speech, 16000, np.random.default_rng(1), fixed)
    assert np.max(np.abs(out)) == pytest.approx(10 ** (-6 / 20))
    assert np.corrcoef(out, speech)[0, 1] > 0.99  # 20 dB SNR, no room: mostly the tone
    assert not np.array_equal(out, degrade(speech, 16000, np.random.default_rng(2), fixed))


def test_degrade_rejects_empty_or_multichannel_input():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        degrade(np.zeros(0), 16000, np.random.default_rng(0))
    with pytest.raises(ValueError, match="non-empty 1-D"):
        degrade(np.zeros((2, 10)), 16000, np.random.default_rng(0))
