"""Helpers shared by the data tests (a uniquely named module: several test folders have a conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
from tiny_models import TINY_CORPUS_SIZES

SMALL = TINY_CORPUS_SIZES  # the tiny corpus of tests/conftest.py
# The data module's keys for these small corpora: a 48-piece tokenizer, 10 s batches in 3 buckets, no worker
# processes (loading or preparing).
SMALL_LOADER = dict(vocab_size=48, max_duration=10.0, num_buckets=3, num_workers=0, prepare_num_workers=1)


def write_flac(path: Path, seconds: float, sample_rate: int = 16000, seed: int = 0) -> Path:
    """A noisy tone of `seconds` at `sample_rate` as 16-bit flac."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    audio = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.01 * rng.standard_normal(t.shape)
    sf.write(str(path), audio.astype("float32"), sample_rate, format="FLAC", subtype="PCM_16")
    return path


def write_chapter(
    split_dir: Path, speaker: int, chapter: int, texts: dict[int, str], seconds: float = 1.0, transcript: bool = True
) -> Path:
    """speaker/chapter folder with one flac per utterance number and (optionally) the trans.txt."""
    chapter_dir = split_dir / str(speaker) / str(chapter)
    for number in texts:
        write_flac(chapter_dir / f"{speaker}-{chapter}-{number:04d}.flac", seconds + 0.1 * number, seed=number)
    if transcript:
        lines = "".join(f"{speaker}-{chapter}-{n:04d} {text}\n" for n, text in texts.items())
        (chapter_dir / f"{speaker}-{chapter}.trans.txt").write_text(lines)
    return chapter_dir


def write_small_librispeech(root: Path) -> Path:
    """A LibriSpeech-layout corpus under `root` without TTS: train-clean-100 (2 chapters of 6 utterances, two
    transcripts with accented letters) and dev-clean (4 utterances), 0.5-1.5 s noisy tones."""
    words = "THE CAT DOG SEES A RED BIG SMALL HOUSE TREE".split()
    for chapter in (1, 2):
        texts = {n: " ".join(words[(n + k + chapter) % len(words)] for k in range(4)) for n in range(6)}
        if chapter == 1:
            texts[0], texts[1] = "THE CAFÉ SEES A DOG", "NAÏVE CAT"
        write_chapter(root / "train-clean-100", 19, chapter, texts, seconds=0.5)
    write_chapter(root / "dev-clean", 84, 7, {n: f"A {words[n]} SEES THE TREE" for n in range(4)}, seconds=0.6)
    return root


def tree_listing(root: Path) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime ns)} of everything under `root` (directories too)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }
