"""A small synthetic LibriSpeech: espeak-ng speech of sentences from a toy grammar, in the exact
LibriSpeech layout (ROOT/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac, 16 kHz, trans.txt).

Splits are "train", "dev" and "test" with disjoint sentences; speakers (espeak voice, rate, pitch)
are shared by all splits. Everything is fixed by the seed. Generation is idempotent: files already there
are reused, and a directory holding anything else is refused rather than touched.
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

from asr_plugin.data.atomic import write_atomic, write_text_atomic
from asr_plugin.data.audio import SAMPLE_RATE
from asr_plugin.data.tts import synthesize_batch

CORPUS_VERSION = 1
MARKER = "mini_corpus.json"
MINI_SPLITS = ("train", "dev", "test")
_CHAPTER_BASE = {"train": 1000, "dev": 2000, "test": 3000}
_RESAMPLE_BATCH = 64

NUMBERS = ("TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE", "TEN")
COLOURS = ("RED", "BLUE", "GREEN", "YELLOW", "BLACK", "WHITE", "BROWN", "PINK")
SIZES = ("BIG", "SMALL", "TALL", "SOFT")
NOUNS = {"CAT": "CATS", "DOG": "DOGS", "BIRD": "BIRDS", "FISH": "FISH", "HORSE": "HORSES", "BOOK": "BOOKS",
         "BALL": "BALLS", "CAR": "CARS", "BOX": "BOXES", "TREE": "TREES", "HAT": "HATS", "CUP": "CUPS"}
VERBS = ("SEES", "LIKES", "FINDS", "HAS", "WANTS", "TAKES", "HOLDS", "CHASES")
PLACES = ("NEAR", "UNDER", "ON", "BEHIND")


@dataclass(frozen=True)
class Speaker:
    """A synthetic speaker: an espeak-ng voice (with variant) at a speaking rate (words/min) and pitch (0-99)."""

    id: int
    voice: str
    rate: int
    pitch: int


SPEAKERS = (
    Speaker(101, "en-us", 135, 50),
    Speaker(102, "en", 125, 40),
    Speaker(103, "en-gb-x-rp", 140, 55),
    Speaker(104, "en-us+f3", 130, 65),
    Speaker(105, "en+m3", 120, 35),
    Speaker(106, "en-gb-scotland+f2", 140, 60),
    Speaker(107, "en-029", 125, 45),
    Speaker(108, "en-us+m5", 145, 50),
)


def _adjective(rng: random.Random, probability: float = 0.5) -> list[str]:
    return [rng.choice(COLOURS + SIZES)] if rng.random() < probability else []


def _noun_phrase(rng: random.Random) -> list[str]:
    """'A [adj] noun', 'THE [adj] noun' or 'NUMBER [adj] nouns'."""
    noun = rng.choice(list(NOUNS))
    kind = rng.randrange(3)
    if kind == 2:
        return [rng.choice(NUMBERS)] + _adjective(rng) + [NOUNS[noun]]
    return [("A", "THE")[kind]] + _adjective(rng) + [noun]


def random_sentence(rng: random.Random) -> str:
    """One sentence of 4-9 words from the toy grammar, e.g. "THE RED CAT SEES A BIG DOG"."""
    template = rng.randrange(5)
    noun = rng.choice(list(NOUNS))
    if template == 0:
        words = ["THE"] + _adjective(rng, 0.7) + [noun, rng.choice(VERBS)] + _noun_phrase(rng)
    elif template == 1:
        words = ["THE"] + _adjective(rng) + [noun, "IS", rng.choice(COLOURS)]
        if rng.random() < 0.5:
            words += ["AND", rng.choice(COLOURS)]
    elif template == 2:
        words = [rng.choice(NUMBERS)] + _adjective(rng) + [NOUNS[noun], "ARE", rng.choice(PLACES), "THE",
                                                          rng.choice(list(NOUNS))]
    elif template == 3:
        words = ["I", "SEE", rng.choice(NUMBERS), rng.choice(COLOURS), NOUNS[noun], "AND", "A",
                 rng.choice(list(NOUNS))]
    else:
        words = ["MY", noun, "IS", rng.choice(PLACES), "THE"] + _adjective(rng) + [rng.choice(list(NOUNS))]
    return " ".join(words)


def vocabulary() -> list[str]:
    """Every word the grammar can produce (sorted)."""
    words = {"THE", "A", "IS", "ARE", "I", "SEE", "MY", "AND"}
    words.update(NUMBERS, COLOURS, SIZES, NOUNS, NOUNS.values(), VERBS, PLACES)
    return sorted(words)


def plan_corpus(n_train: int, n_dev: int, n_test: int, seed: int) -> dict[str, list[tuple[str, Speaker, str]]]:
    """{split: [(utterance id, speaker, sentence)]} with distinct sentences across and within splits."""
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
    plan = {}
    start = 0
    for split in MINI_SPLITS:
        utterances = []
        per_chapter: dict[int, int] = defaultdict(int)
        for sentence in pool[start:start + counts[split]]:
            speaker = rng.choice(SPEAKERS)
            chapter = _CHAPTER_BASE[split] + speaker.id % 100
            utterances.append((f"{speaker.id}-{chapter}-{per_chapter[speaker.id]:04d}", speaker, sentence))
            per_chapter[speaker.id] += 1
        plan[split] = utterances
        start += counts[split]
    return plan


def _synthesize(plan: dict[str, list[tuple[str, Speaker, str]]]) -> dict[str, np.ndarray]:
    """{utterance id: (N,) float32 audio at 16 kHz} for the whole plan, always synthesised in plan order
    (see asr_plugin.data.tts: that makes each file's samples a function of the plan alone)."""
    utterances = [utt for split in MINI_SPLITS for utt in plan[split]]
    # espeak reads all-capital words as acronyms, so it gets lower case.
    requests = [(sentence.lower(), speaker.voice, speaker.rate, speaker.pitch) for _, speaker, sentence in utterances]
    samples, sample_rate = synthesize_batch(requests)
    for (_, speaker, sentence), int16 in zip(utterances, samples):
        if int16.size == 0:
            raise RuntimeError(f"espeak-ng produced no audio for {sentence!r} (voice {speaker.voice})")
    audio = {}
    # Resampling zero-padded batches is far faster than one call per utterance (one kernel, one conv);
    # the padding only meets each signal where the resampler pads with zeros anyway.
    for start in range(0, len(samples), _RESAMPLE_BATCH):
        chunk = [torch.from_numpy(s.astype("float32") / 32768.0) for s in samples[start:start + _RESAMPLE_BATCH]]
        with torch.no_grad():
            resampled = torchaudio.functional.resample(
                torch.nn.utils.rnn.pad_sequence(chunk, batch_first=True), sample_rate, SAMPLE_RATE)  # (B, N')
        for (utt_id, _, _), wave, row in zip(utterances[start:], chunk, resampled):
            audio[utt_id] = row[: -(-wave.numel() * SAMPLE_RATE // sample_rate)].numpy()
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


def make_mini_librispeech(root: str | os.PathLike, n_train: int = 400, n_dev: int = 50, n_test: int = 50,
                          seed: int = 0) -> Path:
    """Generates (or completes) the mini corpus under `root` and returns `root`.

    A few seconds for the default 500 utterances (about 2.5 s each); n_train=24, n_dev=8, n_test=8 makes a
    corpus for tests in well under a second. Raises RuntimeError naming what to install without espeak-ng.
    """
    root = Path(root)
    params = {"version": CORPUS_VERSION, "seed": seed, "n_train": n_train, "n_dev": n_dev, "n_test": n_test}
    plan = plan_corpus(n_train, n_dev, n_test, seed)
    _check_root(root, params)
    audio: dict[str, np.ndarray] | None = None
    for split, utterances in plan.items():
        chapters: dict[Path, list[str]] = defaultdict(list)
        for utt_id, _, sentence in utterances:
            speaker_id, chapter, _ = utt_id.split("-")
            chapter_dir = root / split / speaker_id / chapter
            chapters[chapter_dir / f"{speaker_id}-{chapter}.trans.txt"].append(f"{utt_id} {sentence}")
            flac = chapter_dir / f"{utt_id}.flac"
            if not _is_valid_audio(flac):
                audio = _synthesize(plan) if audio is None else audio
                write_atomic(flac, lambda tmp: sf.write(str(tmp), audio[utt_id], SAMPLE_RATE, format="FLAC",
                                                        subtype="PCM_16"))
        for transcript, lines in chapters.items():
            _write_transcript(transcript, lines)
    return root
