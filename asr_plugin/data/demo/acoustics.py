"""Mild, deterministic acoustic variation for synthetic speech: room reverberation, background noise, level.

Clean synthetic speech is too easy: a model can learn the synthesiser's exact waveforms. Real recordings
have rooms and noise, so the mini corpus passes every utterance through `degrade`, with parameters drawn
from a numpy Generator the caller seeds per utterance (float64 throughout, so the output depends only on
the input, the seed and numpy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Acoustics:
    """The ranges `degrade` draws from (uniformly).

    reverb_probability: share of utterances played in a room; rt60: reverberation time in seconds;
    direct_to_reverb_db: direct-path over reverberant energy; snr_db: speech over noise energy;
    level_db: output peak in dB below full scale.
    """

    reverb_probability: float = 0.3
    rt60: tuple[float, float] = (0.1, 0.35)
    direct_to_reverb_db: tuple[float, float] = (6.0, 15.0)
    snr_db: tuple[float, float] = (18.0, 35.0)
    level_db: tuple[float, float] = (-12.0, -1.0)


def _fft_size(length: int) -> int:
    """The power of two >= length: FFTs of arbitrary lengths (large prime factors) are several times slower."""
    return 1 << max(0, length - 1).bit_length()


def room_impulse_response(
    rng: np.random.Generator, sample_rate: int, rt60: float, direct_to_reverb_db: float
) -> np.ndarray:
    """(N,) float64: a unit direct path followed by exponentially decaying noise (the statistical model of a
    reverberant tail), 60 dB down after `rt60` seconds."""
    length = max(2, int(rt60 * sample_rate))
    decay = np.exp(-np.log(1000.0) * np.arange(length) / length)  # amplitude falls 60 dB over rt60
    response = rng.standard_normal(length) * decay
    response[0] = 0.0
    response *= 10.0 ** (-direct_to_reverb_db / 20.0) / np.sqrt(np.sum(response**2))
    response[0] = 1.0
    return response


def coloured_noise(rng: np.random.Generator, length: int) -> np.ndarray:
    """(length,) float64 noise between white and brown: white noise whose spectrum is tilted by a random
    exponent (power ~ 1/f^k, k in [0, 2]), as background noise of rooms, fans and traffic is."""
    size = _fft_size(length)
    spectrum = np.fft.rfft(rng.standard_normal(size))
    frequencies = np.arange(1, spectrum.size + 1, dtype=np.float64)
    spectrum *= frequencies ** (-rng.uniform(0.0, 2.0) / 2.0)
    return np.fft.irfft(spectrum, n=size)[:length]


def add_noise(signal: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """signal + noise scaled so that signal energy / noise energy (over the whole utterance) is `snr_db`."""
    gain = np.sqrt(np.mean(signal**2) / (10.0 ** (snr_db / 10.0) * np.mean(noise**2)))
    return signal + gain * noise


def degrade(
    speech: np.ndarray, sample_rate: int, rng: np.random.Generator, acoustics: Acoustics = Acoustics()
) -> np.ndarray:
    """(N,) float speech -> (N,) float64 with (maybe) reverberation, noise at a random SNR and a random level.

    The output keeps the input's length (the reverberant tail past the end is cut, as a recording stops).
    """
    if speech.ndim != 1 or speech.size == 0:
        raise ValueError(f"speech must be a non-empty 1-D array, got shape {speech.shape}")
    signal = speech.astype(np.float64)
    if rng.uniform() < acoustics.reverb_probability:
        response = room_impulse_response(
            rng, sample_rate, rng.uniform(*acoustics.rt60), rng.uniform(*acoustics.direct_to_reverb_db)
        )
        size = _fft_size(signal.size + response.size - 1)
        signal = np.fft.irfft(np.fft.rfft(signal, size) * np.fft.rfft(response, size), size)[: speech.size]
    mixed = add_noise(signal, coloured_noise(rng, signal.size), rng.uniform(*acoustics.snr_db))
    peak = np.max(np.abs(mixed))
    return mixed * (10.0 ** (rng.uniform(*acoustics.level_db) / 20.0) / peak if peak > 0 else 1.0)
