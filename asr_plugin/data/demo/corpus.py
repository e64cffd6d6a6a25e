"""A small synthetic LibriSpeech: speech of sentences from a ~400-word grammar (`asr_plugin.data.demo.grammar`)
by two text-to-speech engines, espeak-ng (formant synthesis) and Piper (a neural VITS voice), in the exact
LibriSpeech layout (ROOT/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac, 16 kHz, trans.txt).

Splits "train" and "dev" mix the training engines (`train_engines`, by `ENGINE_WEIGHTS`); every engine has
its own test split, "test-espeak" and "test-piper", whatever the training engines, so that a model trained
without one engine is tested on it. Splits have disjoint sentences and disjoint speakers
(`asr_plugin.data.demo.voices`). Speaking rate varies per speaker and utterance, and every utterance gets a
room, background noise and a level (`asr_plugin.data.demo.acoustics`). Everything is fixed by the seed: the same
arguments and version give byte-identical files, and the test splits do not depend on `train_engines`.
Generation is idempotent: files already there are reused, and a directory holding anything else is refused
rather than touched.
"""

from __future__ import annotations

import json
import os
import random
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from asr_plugin.audio.reading import SAMPLE_RATE
from asr_plugin.data.demo.acoustics import degrade
from asr_plugin.data.demo.grammar import random_sentence
from asr_plugin.data.demo.synthesis import synthesize_lists, to_sample_rate
from asr_plugin.data.demo.voices import ENGINES, Speaker, speakers
from asr_plugin.files import write_atomic, write_text_atomic
from asr_plugin.progress import Progress

CORPUS_VERSION = 3
MARKER = "mini_corpus.json"


def engine_test_split(engine: str) -> str:
    """The test split of one engine: "test-<engine>"."""
    return f"test-{engine}"


MINI_SPLITS = ("train", "dev", *(engine_test_split(engine) for engine in ENGINES))
_CHAPTER_BASE = {"train": 1000, "dev": 2000, "test": 3000}
# Shares of each training engine in train and dev. Piper synthesises ~10x faster than real time on one core
# of this project's CPU machine, espeak-ng ~400x (docs/data.md): Piper's share is most of the synthesis time.
ENGINE_WEIGHTS = {"espeak": 2, "piper": 1}
# Utterances per synthesis process: the audio depends only on the chunk (module docstring of `synthesis`).
SYNTHESIS_CHUNK = {"espeak": 256, "piper": 64}
TEMPO_JITTER = 0.1  # each utterance: the speaker's speed +-10 %


@dataclass(frozen=True)
class Utterance:
    """One planned utterance: LibriSpeech-style id, speaker, transcript and this utterance's tempo (a factor
    on the speaker's speed)."""

    id: str
    speaker: Speaker
    text: str
    tempo: float


def _check_engines(train_engines: Sequence[str]) -> tuple[str, ...]:
    engines = tuple(train_engines)
    unknown = [engine for engine in engines if engine not in ENGINES]
    if not engines or unknown or len(set(engines)) != len(engines):
        raise ValueError(f"train_engines must name distinct engines out of {list(ENGINES)}, got {list(engines)}")
    return engines


def _engine_sequence(count: int, engines: tuple[str, ...], rng: random.Random) -> list[str]:
    """`count` engine names in `ENGINE_WEIGHTS` shares (largest remainders), shuffled."""
    total = sum(ENGINE_WEIGHTS[engine] for engine in engines)
    exact = {engine: count * ENGINE_WEIGHTS[engine] / total for engine in engines}
    counts = {engine: int(value) for engine, value in exact.items()}
    by_remainder = sorted(engines, key=lambda engine: counts[engine] - exact[engine])
    for engine in by_remainder[: count - sum(counts.values())]:
        counts[engine] += 1
    sequence = [engine for engine in engines for _ in range(counts[engine])]
    rng.shuffle(sequence)
    return sequence


def _sentences(total: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    sentences: dict[str, None] = {}  # insertion-ordered set
    for _ in range(100 * total):
        sentences.setdefault(random_sentence(rng))
        if len(sentences) == total:
            return list(sentences)
    raise ValueError(f"the grammar produced only {len(sentences)} distinct sentences, {total} requested")


def plan_corpus(
    n_train: int, n_dev: int, n_test: int, seed: int, train_engines: Sequence[str] = ENGINES
) -> dict[str, list[Utterance]]:
    """{split: [Utterance]} for `MINI_SPLITS`: n_train and n_dev utterances of the training engines, n_test of
    each engine's test split; distinct sentences across and within splits, each split spoken by its own
    speakers. Each split draws from its own generator, so the test splits do not depend on `train_engines`."""
    counts = {"train": n_train, "dev": n_dev, "test": n_test}
    for name, count in counts.items():
        if count < 1:
            raise ValueError(f"n_{name} must be >= 1, got {count}")
    engines = _check_engines(train_engines)
    pool = iter(_sentences(n_train + n_dev + n_test * len(ENGINES), seed))
    voices = speakers(seed)
    plan = {}
    for split in MINI_SPLITS:
        kind = split.split("-")[0]
        rng = random.Random(f"{seed}-{split}")
        sequence = (
            _engine_sequence(counts[kind], engines, rng) if kind != "test" else [split.removeprefix("test-")] * n_test
        )
        utterances = []
        per_speaker: dict[int, int] = defaultdict(int)
        for engine in sequence:
            speaker = rng.choice(voices[(kind, engine)])
            chapter = _CHAPTER_BASE[kind] + speaker.id
            tempo = round(rng.uniform(1 - TEMPO_JITTER, 1 + TEMPO_JITTER), 4)
            utterances.append(
                Utterance(f"{speaker.id}-{chapter}-{per_speaker[speaker.id]:04d}", speaker, next(pool), tempo)
            )
            per_speaker[speaker.id] += 1
        plan[split] = utterances
    return plan


def _chunks(plan: dict[str, list[Utterance]], seed: int) -> list[tuple[str, list[tuple[int, Utterance]], int]]:
    """[(engine, [(position in the plan, utterance)], synthesis seed)]: each split's utterances of one engine
    cut into `SYNTHESIS_CHUNK` pieces, so a chunk's audio depends only on its split's plan."""
    chunks = []
    position = 0
    for split in MINI_SPLITS:
        by_engine: dict[str, list[tuple[int, Utterance]]] = defaultdict(list)
        for utt in plan[split]:
            by_engine[utt.speaker.engine].append((position, utt))
            position += 1
        for engine, utterances in by_engine.items():
            size = SYNTHESIS_CHUNK[engine]
            for start in range(0, len(utterances), size):
                chunk_seed = zlib.crc32(f"{seed}-{split}-{engine}-{start}".encode())
                chunks.append((engine, utterances[start : start + size], chunk_seed))
    return chunks


def _render(
    chunk: list[tuple[int, Utterance]], synthesized: list[tuple[np.ndarray, int]], seed: int
) -> dict[str, np.ndarray]:
    """{utterance id: (N,) int16 audio at 16 kHz}: the chunk's synthesized audio resampled, with room, noise
    and level drawn from (seed, position in the plan)."""
    for (_, utt), (samples, _) in zip(chunk, synthesized):
        if samples.size == 0:
            raise RuntimeError(f"{utt.speaker.engine} produced no audio for {utt.text!r} ({utt.speaker.voice})")
    audio = {}
    for (position, utt), speech in zip(chunk, to_sample_rate(synthesized, SAMPLE_RATE)):
        degraded = degrade(speech, SAMPLE_RATE, np.random.default_rng([seed, position]))
        audio[utt.id] = np.round(degraded * 32767.0).astype(np.int16)
    return audio


def _synthesize(
    plan: dict[str, list[Utterance]], flac_paths: dict[str, Path], seed: int, workers: int | None, progress: bool
) -> None:
    """Writes the missing files of `flac_paths`: only chunks holding one are synthesised, so every file is a
    function of the plan alone, whichever are missing. One engine after the other, each with its progress
    (their speeds differ ~40x: one count over both would give a meaningless ETA)."""
    wanted = {utt_id for utt_id, path in flac_paths.items() if not _is_valid_audio(path)}
    chunks = [chunk for chunk in _chunks(plan, seed) if any(utt.id in wanted for _, utt in chunk[1])]
    for engine in ENGINES:
        of_engine = [chunk for chunk in chunks if chunk[0] == engine]
        if not of_engine:
            continue
        tasks = [
            (engine, [utt.speaker.voice.request(utt.text, utt.tempo) for _, utt in chunk], chunk_seed)
            for engine, chunk, chunk_seed in of_engine
        ]
        total = sum(len(chunk) for _, chunk, _ in of_engine)
        with Progress(total, f"synthesizing speech with {engine}", enabled=progress) as shown:
            # strict: the generator runs to its end, so its pool closes here and not later in garbage collection
            # (where an exception raised by a signal handler, SIGTERM's `StoppedBySignal`, would be swallowed)
            for (_, chunk, _), synthesized in zip(of_engine, synthesize_lists(tasks, workers), strict=True):
                for utt_id, samples in _render(chunk, synthesized, seed).items():
                    if utt_id in wanted:
                        write_atomic(
                            flac_paths[utt_id],
                            lambda tmp, samples=samples: sf.write(
                                str(tmp), samples, SAMPLE_RATE, format="FLAC", subtype="PCM_16"
                            ),
                        )
                shown.update(len(chunk))


def _is_valid_audio(path: Path) -> bool:
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError):
        return False
    return info.samplerate == SAMPLE_RATE and info.frames > 0


def _check_root(root: Path, params: dict) -> None:
    """Writes the marker in a new/empty root; refuses a root made with other parameters or holding other files."""
    marker = root / MARKER
    if marker.exists():
        existing = json.loads(marker.read_text(encoding="utf-8"))
        if existing != params:
            raise ValueError(
                f"root {root} holds a mini corpus made with {existing}, not {params}; "
                "use another root or delete that directory yourself"
            )
        return
    if root.exists() and any(root.iterdir()):
        raise ValueError(f"root {root} is not empty and has no {MARKER}; refusing to write a corpus into it")
    write_text_atomic(marker, json.dumps(params, indent=1, sort_keys=True))


def _write_transcript(path: Path, lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    if path.exists():
        if path.read_text(encoding="utf-8") != text:
            raise ValueError(f"{path} exists with other content; refusing to overwrite it")
        return
    write_text_atomic(path, text)


def make_mini_librispeech(
    root: str | os.PathLike,
    n_train: int = 2700,
    n_dev: int = 210,
    n_test: int = 150,
    seed: int = 0,
    train_engines: Sequence[str] = ENGINES,
    workers: int | None = None,
    progress: bool = True,
) -> Path:
    """Generates (or completes) the mini corpus under `root` and returns `root`.

    n_train and n_dev utterances of the training engines (`ENGINE_WEIGHTS` shares; `train_engines=["espeak"]`
    leaves Piper out of train and dev), n_test in each engine's test split. `workers`: synthesis processes at
    once (default: every CPU; the files do not depend on it). n_train=24, n_dev=8, n_test=8 makes a corpus for
    tests in a few seconds. `progress`: show each engine's synthesis (`asr_plugin.progress`). Raises
    RuntimeError naming what to install without an engine.
    """
    root = Path(root)
    engines = list(_check_engines(train_engines))
    params = {
        "version": CORPUS_VERSION,
        "seed": seed,
        "n_train": n_train,
        "n_dev": n_dev,
        "n_test": n_test,
        "train_engines": engines,
    }
    plan = plan_corpus(n_train, n_dev, n_test, seed, engines)
    _check_root(root, params)
    flac_paths = {
        utt.id: root / split / _chapter_dir(utt.id) / f"{utt.id}.flac" for split in MINI_SPLITS for utt in plan[split]
    }
    _synthesize(plan, flac_paths, seed, workers, progress)
    for split in MINI_SPLITS:
        chapters: dict[Path, list[str]] = defaultdict(list)
        for utt in plan[split]:
            speaker_id, chapter, _ = utt.id.split("-")
            chapters[root / split / _chapter_dir(utt.id) / f"{speaker_id}-{chapter}.trans.txt"].append(
                f"{utt.id} {utt.text}"
            )
        for transcript, lines in chapters.items():
            _write_transcript(transcript, lines)
    return root


def _chapter_dir(utt_id: str) -> Path:
    speaker_id, chapter, _ = utt_id.split("-")
    return Path(speaker_id) / chapter
