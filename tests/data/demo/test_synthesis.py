"""The mini corpus' text-to-speech engines: Piper's audio depends only on the list and its seed, engines run in
worker processes, and audio of several source rates is brought to one rate (checked against sines)."""

from __future__ import annotations

import numpy as np
import pytest

from asr_plugin.data.demo.synthesis import synthesize_lists, to_sample_rate
from asr_plugin.data.demo.tts_piper import PiperRequest, synthesize_piper

REQUEST = PiperRequest(
    "the old lamp is in the kitchen", length_scale=1.0, noise_scale=0.667, noise_w=0.8, played_at_hz=22050
)


def test_piper_audio_depends_only_on_the_list_and_seed():
    first = synthesize_piper([REQUEST, REQUEST], seed=5)
    again = synthesize_piper([REQUEST, REQUEST], seed=5)
    other = synthesize_piper([REQUEST], seed=6)
    assert all(np.array_equal(a, b) and rate == 22050 for (a, rate), (b, _) in zip(first, again))
    assert not np.array_equal(first[0][0], first[1][0])  # the generators advance within a list
    assert not np.array_equal(first[0][0], other[0][0])
    samples = first[0][0]
    assert samples.dtype == np.float32 and 1.0 < samples.size / 22050 < 4.0 and np.abs(samples).max() <= 1.0


def test_workers_give_the_same_audio_as_one_process():
    tasks = [("espeak", [("the red book", "en-us+m3", 160, 50)], 0), ("piper", [REQUEST], 7)]
    in_workers = list(synthesize_lists(tasks, workers=2))
    here = [synthesize_piper([REQUEST], 7)]
    assert np.array_equal(in_workers[1][0][0], here[0][0][0])
    assert in_workers[0][0][0].size > 0
    with pytest.raises(ValueError, match="festival"):
        list(synthesize_lists([("festival", [], 0)]))


def _peak_hz(signal: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(signal * np.hanning(signal.size)))
    return float(np.argmax(spectrum) * rate / signal.size)


@pytest.mark.parametrize("played_at_hz", [19200, 22050, 25200, 16000])
def test_to_sample_rate_plays_samples_at_their_declared_rate(played_at_hz):
    period = 40  # samples: a 40-sample sine declared at rate r is an r/40 Hz tone
    sines = [(np.sin(2 * np.pi * np.arange(n) / period).astype(np.float32), played_at_hz) for n in (9000, 12345)]
    noise = (np.random.default_rng(0).standard_normal(5000).astype(np.float32), 44100)  # another rate, same call
    out = to_sample_rate([sines[0], noise, sines[1]], 16000)
    for (samples, _), converted in zip(sines, (out[0], out[2])):
        assert converted.size == -(-samples.size * 16000 // played_at_hz)
        assert abs(_peak_hz(converted, 16000) - played_at_hz / period) < 16000 / converted.size * 1.5
    assert out[1].size == -(-5000 * 16000 // 44100)


def test_throughput_benchmark_times_each_engine():
    from benchmarks.tts import tts_throughput

    rows = tts_throughput(utterances=2)
    assert [row.engine for row in rows] == ["espeak", "piper"]
    assert all(row.utterances == 2 and row.audio_s > 1.0 and row.real_time_factor > 0 for row in rows)
