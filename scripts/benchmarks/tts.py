"""Synthesis throughput of the mini corpus' text-to-speech engines (`scripts/benchmark_tts.py`): seconds of
audio per second of wall time, one process, as `make_mini_librispeech` runs each of its workers; and where a
Piper utterance's time goes, stage by stage (`--stages`)."""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from asr_plugin.audio.reading import SAMPLE_RATE
from asr_plugin.data.demo.acoustics import degrade
from asr_plugin.data.demo.corpus import ENGINE_WEIGHTS, Utterance, plan_corpus
from asr_plugin.data.demo.synthesis import synthesize_lists, to_sample_rate
from asr_plugin.data.demo.tts_piper import load_voice
from asr_plugin.data.demo.voices import ENGINES

# What one Piper utterance of the corpus goes through, in order (asr_plugin.data.demo.tts_piper, .synthesis, .corpus)
PIPER_STAGES = ("voice load", "phonemisation", "inference", "resampling", "room and noise", "FLAC writing")


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


def _training_utterances(engine: str, utterances: int, seed: int) -> list[Utterance]:
    plan = plan_corpus(utterances * sum(ENGINE_WEIGHTS.values()), 1, 1, seed)["train"]  # >= `utterances` each
    return [utt for utt in plan if utt.speaker.engine == engine][:utterances]


def tts_throughput(utterances: int = 64, seed: int = 0) -> list[Throughput]:
    """Each engine synthesises `utterances` of its training speakers' mini-corpus sentences in one fresh process."""
    rows = []
    for engine in ENGINES:
        chosen = _training_utterances(engine, utterances, seed)
        requests = [utt.speaker.voice.request(utt.text, utt.tempo) for utt in chosen]
        start = time.perf_counter()
        (audio,) = synthesize_lists([(engine, requests, seed)], workers=1)
        wall = time.perf_counter() - start
        rows.append(Throughput(engine, len(audio), sum(samples.size / rate for samples, rate in audio), wall))
    return rows


def piper_stages(utterances: int = 64, seed: int = 0) -> dict[str, float]:
    """{stage of `PIPER_STAGES`: wall seconds} of `utterances` Piper training utterances taken through the corpus'
    steps in this process, one chunk: one voice load, then per utterance Piper's phonemisation and its ONNX
    inference (`PiperVoice.synthesize` split in its two parts), one resampling call over the chunk, and per
    utterance the room and noise and the FLAC file; plus "audio (s)", the seconds of speech made."""
    from piper.config import SynthesisConfig

    seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def stage(name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        seconds[name] += time.perf_counter() - start

    with stage("voice load"):
        voice = load_voice(seed)
    synthesized = []
    for utt in _training_utterances("piper", utterances, seed):
        request = utt.speaker.voice.request(utt.text, utt.tempo)
        with stage("phonemisation"):
            ids = [voice.phonemes_to_ids(phonemes) for phonemes in voice.phonemize(request.text)]
        settings = SynthesisConfig(
            length_scale=request.length_scale, noise_scale=request.noise_scale, noise_w_scale=request.noise_w
        )
        with stage("inference"):
            audio = np.concatenate([voice.phoneme_ids_to_audio(sentence, settings) for sentence in ids])
        synthesized.append((audio.astype(np.float32), request.played_at_hz))
    with stage("resampling"):
        speech = to_sample_rate(synthesized, SAMPLE_RATE)
    with tempfile.TemporaryDirectory() as tmp:
        for number, wave in enumerate(speech):
            with stage("room and noise"):
                samples = np.round(degrade(wave, SAMPLE_RATE, np.random.default_rng([seed, number])) * 32767.0)
            with stage("FLAC writing"):
                sf.write(str(Path(tmp) / f"{number}.flac"), samples.astype(np.int16), SAMPLE_RATE, subtype="PCM_16")
    audio_s = sum(wave.size for wave in speech) / SAMPLE_RATE
    return {**{name: seconds[name] for name in PIPER_STAGES}, "audio (s)": audio_s}
