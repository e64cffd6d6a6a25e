"""Synthesis throughput of the mini corpus' text-to-speech engines (`scripts/benchmark_tts.py`): seconds of
audio per second of wall time, one process, as `make_mini_librispeech` runs each of its workers."""

from __future__ import annotations

import time
from dataclasses import dataclass

from asr_plugin.data.demo.corpus import ENGINE_WEIGHTS, plan_corpus
from asr_plugin.data.demo.synthesis import synthesize_lists
from asr_plugin.data.demo.voices import ENGINES


@dataclass(frozen=True)
class Throughput:
    """One engine's run: utterances, seconds of audio, wall seconds (process start and model loading included)."""

    engine: str
    utterances: int
    audio_s: float
    wall_s: float

    @property
    def real_time_factor(self) -> float:
        """Audio seconds per wall second (above 1: faster than real time)."""
        return self.audio_s / self.wall_s


def tts_throughput(utterances: int = 64, seed: int = 0) -> list[Throughput]:
    """Each engine synthesises `utterances` of its training speakers' mini-corpus sentences in one fresh process."""
    plan = plan_corpus(utterances * sum(ENGINE_WEIGHTS.values()), 1, 1, seed)["train"]  # >= `utterances` each
    rows = []
    for engine in ENGINES:
        chosen = [utt for utt in plan if utt.speaker.engine == engine][:utterances]
        requests = [utt.speaker.voice.request(utt.text, utt.tempo) for utt in chosen]
        start = time.perf_counter()
        (audio,) = synthesize_lists([(engine, requests, seed)], workers=1)
        wall = time.perf_counter() - start
        rows.append(Throughput(engine, len(audio), sum(samples.size / rate for samples, rate in audio), wall))
    return rows
