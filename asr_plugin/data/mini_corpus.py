"""A small synthetic LibriSpeech: espeak-ng speech of sentences from a ~400-word grammar
(`asr_plugin.data.mini_grammar`), in the exact LibriSpeech layout
(ROOT/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac, 16 kHz, trans.txt).

Splits "train", "dev" and "test" have disjoint sentences and disjoint speakers: dev and test voices use
espeak-ng variants that training never hears. Speaking rate varies per speaker and utterance, and every
utterance gets a room, background noise and a level (`asr_plugin.data.acoustics`). Everything is fixed by the
seed: the same seed and version give byte-identical files. Generation is idempotent: files already there are
reused, and a directory holding anything else is refused rather than touched.
"""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
import torchaudio

from asr_plugin.data.acoustics import degrade
from asr_plugin.data.atomic import write_atomic, write_text_atomic
from asr_plugin.data.audio import SAMPLE_RATE
from asr_plugin.data.mini_grammar import random_sentence
from asr_plugin.data.tts import synthesize_batch

CORPUS_VERSION = 2
MARKER = "mini_corpus.json"
MINI_SPLITS = ("train", "dev", "test")
_CHAPTER_BASE = {"train": 1000, "dev": 2000, "test": 3000}
_SYNTHESIS_CHUNK = 256  # utterances per fresh synthesis process (the audio depends only on the chunk)

# English accents of espeak-ng: how words are pronounced. Every accent is heard in training.
ACCENTS = ("en-us", "en", "en-gb-x-rp", "en-gb-scotland", "en-us-nyc", "en-029", "en-gb-x-gbclan",
           "en-gb-x-gbcwmd")
# espeak-ng voice variants: the timbre (formants, pitch range, synthesis method). Dev and test speakers use
# variants that training never hears, so dev/test WER measures unseen speakers.
VARIANTS = {
    "train": ("m1", "m3", "m5", "m6", "m7", "m8", "f1", "f3", "f4", "klatt", "klatt4", "klatt5", "Alex", "adam",
              "anika", "aunty", "benjamin", "boris", "david", "ed", "edward", "grandma", "grandpa", "iven",
              "linda", "max", "michel", "paul", "quincy", "rob", "steph", "travis", "victor", "Mike", "Reed",
              "Hugo", "Alicia", "Andrea", "Denis", "Mario"),
    "dev": ("m4", "f5", "klatt2", "robert"),
    "test": ("m2", "f2", "klatt3", "Michael", "belinda", "Gene"),
}
_SPEAKER_BASE = {"train": 100, "dev": 800, "test": 900}
RATE_RANGE = (135, 185)  # words per minute of a speaker
RATE_JITTER = 0.1  # each utterance: the speaker's rate +-10 %
PITCH_RANGE = (30, 70)  # espeak-ng base pitch (0-99), on top of the variant's own range


@dataclass(frozen=True)
class Speaker:
    """A synthetic speaker: an espeak-ng accent + variant, a speaking rate (words/min) and pitch (0-99)."""

    id: int
    voice: str
    rate: int
    pitch: int


@dataclass(frozen=True)
class Utterance:
    """One planned utterance: LibriSpeech-style id, speaker, transcript and this utterance's speaking rate."""

    id: str
    speaker: Speaker
    text: str
    rate: int


def speakers(seed: int) -> dict[str, tuple[Speaker, ...]]:
    """{split: speakers}: one speaker per variant of that split, with an accent, rate and pitch from `seed`."""
    rng = random.Random(f"speakers-{seed}")
    result = {}
    for split in MINI_SPLITS:
        result[split] = tuple(
            Speaker(_SPEAKER_BASE[split] + index, f"{rng.choice(ACCENTS)}+{variant}", rng.randint(*RATE_RANGE),
                    rng.randint(*PITCH_RANGE))
            for index, variant in enumerate(VARIANTS[split]))
    return result


def plan_corpus(n_train: int, n_dev: int, n_test: int, seed: int) -> dict[str, list[Utterance]]:
    """{split: [Utterance]}: distinct sentences across and within splits, each split spoken by its own speakers."""
    counts = {"train": n_train, "dev": n_dev, "test": n_test}
    for split, count in counts.items():
        if count < 1:
            raise ValueError(f"n_{split} must be >= 1, got {count}")
    rng = random.Random(seed)
    total = sum(counts.values())
    sentences: dict[str, None] = {}  # insertion-ordered set
    for _ in range(100 * total):
        sentences.setdefault(random_sentence(rng))
        if len(sentences) == total:
            break
    else:
        raise ValueError(f"the grammar produced only {len(sentences)} distinct sentences, {total} requested")
    pool = list(sentences)
    voices = speakers(seed)
    plan = {}
    start = 0
    for split in MINI_SPLITS:
        utterances = []
        per_chapter: dict[int, int] = defaultdict(int)
        for sentence in pool[start:start + counts[split]]:
            speaker = rng.choice(voices[split])
            chapter = _CHAPTER_BASE[split] + speaker.id % 100
            rate = round(speaker.rate * rng.uniform(1 - RATE_JITTER, 1 + RATE_JITTER))
            utterances.append(Utterance(f"{speaker.id}-{chapter}-{per_chapter[speaker.id]:04d}", speaker, sentence,
                                        rate))
            per_chapter[speaker.id] += 1
        plan[split] = utterances
        start += counts[split]
    return plan


def _render_chunk(chunk: list[tuple[int, Utterance]], seed: int) -> dict[str, np.ndarray]:
    """{utterance id: (N,) int16 audio at 16 kHz}: synthesis (in a fresh process), resampling, and room, noise
    and level drawn from (seed, position in the plan)."""
    # espeak reads all-capital words as acronyms, so it gets lower case.
    requests = [(utt.text.lower(), utt.speaker.voice, utt.rate, utt.speaker.pitch) for _, utt in chunk]
    samples, sample_rate = synthesize_batch(requests)
    for (_, utt), int16 in zip(chunk, samples):
        if int16.size == 0:
            raise RuntimeError(f"espeak-ng produced no audio for {utt.text!r} (voice {utt.speaker.voice})")
    # One resampling call for the zero-padded chunk is far faster than one per utterance; the padding only
    # meets each signal where the resampler pads with zeros anyway.
    waves = [torch.from_numpy(int16.astype(np.float32) / 32768.0) for int16 in samples]
    with torch.no_grad():
        resampled = torchaudio.functional.resample(
            torch.nn.utils.rnn.pad_sequence(waves, batch_first=True), sample_rate, SAMPLE_RATE)  # (N, S')
    audio = {}
    for (position, utt), wave, row in zip(chunk, waves, resampled):
        speech = row[: -(-wave.numel() * SAMPLE_RATE // sample_rate)].numpy()
        degraded = degrade(speech, SAMPLE_RATE, np.random.default_rng([seed, position]))
        audio[utt.id] = np.round(degraded * 32767.0).astype(np.int16)
    return audio


def _synthesize(plan: dict[str, list[Utterance]], wanted: set[str], seed: int) -> dict[str, np.ndarray]:
    """{utterance id: (N,) int16 audio} for the `wanted` ids. The plan is cut into fixed chunks and only chunks
    holding a wanted id are rendered, so every file is a function of the plan alone, whichever are missing."""
    utterances = list(enumerate(utt for split in MINI_SPLITS for utt in plan[split]))
    chunks = [utterances[start:start + _SYNTHESIS_CHUNK] for start in range(0, len(utterances), _SYNTHESIS_CHUNK)]
    audio: dict[str, np.ndarray] = {}
    for chunk in chunks:
        if any(utt.id in wanted for _, utt in chunk):
            audio.update(_render_chunk(chunk, seed))
    return audio


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
            raise ValueError(f"root {root} holds a mini corpus made with {existing}, not {params}; "
                             "use another root or delete that directory yourself")
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


def make_mini_librispeech(root: str | os.PathLike, n_train: int = 3000, n_dev: int = 200, n_test: int = 300,
                          seed: int = 0) -> Path:
    """Generates (or completes) the mini corpus under `root` and returns `root`.

    About 20 s for the default 3,500 utterances; n_train=24, n_dev=8, n_test=8 makes a corpus for tests in
    about a second. Raises RuntimeError naming what to install without espeak-ng.
    """
    root = Path(root)
    params = {"version": CORPUS_VERSION, "seed": seed, "n_train": n_train, "n_dev": n_dev, "n_test": n_test}
    plan = plan_corpus(n_train, n_dev, n_test, seed)
    _check_root(root, params)
    flac_paths = {utt.id: root / split / _chapter_dir(utt.id) / f"{utt.id}.flac"
                  for split in MINI_SPLITS for utt in plan[split]}
    missing = {utt_id for utt_id, path in flac_paths.items() if not _is_valid_audio(path)}
    audio = _synthesize(plan, missing, seed) if missing else {}
    for utt_id in sorted(missing):
        write_atomic(flac_paths[utt_id], lambda tmp, samples=audio[utt_id]: sf.write(
            str(tmp), samples, SAMPLE_RATE, format="FLAC", subtype="PCM_16"))
    for split in MINI_SPLITS:
        chapters: dict[Path, list[str]] = defaultdict(list)
        for utt in plan[split]:
            speaker_id, chapter, _ = utt.id.split("-")
            chapters[root / split / _chapter_dir(utt.id) / f"{speaker_id}-{chapter}.trans.txt"].append(
                f"{utt.id} {utt.text}")
        for transcript, lines in chapters.items():
            _write_transcript(transcript, lines)
    return root


def _chapter_dir(utt_id: str) -> Path:
    speaker_id, chapter, _ = utt_id.split("-")
    return Path(speaker_id) / chapter
