"""Writes a LibriSpeech-layout corpus of synthetic "speech" for pipeline checks at any utterance length.

ROOT/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac plus one <speaker>-<chapter>.trans.txt
per chapter, as the real corpus. Each of 400 made-up words (2-3 syllables, enough text for a 500-piece BPE
tokenizer, as LibriSpeech's) is a fixed two-tone chord of 0.3 s (speakers shift the pitch a little), so
the transcripts are learnable but nothing is downloaded or synthesised by a TTS engine: it runs in seconds
for hours of audio (the mini corpus of ``scripts/make_mini_librispeech.py`` is real synthesised speech but
only a few seconds per utterance).

    python scripts/make_synthetic_librispeech.py --root data/synthetic/LibriSpeech \
        --split train-clean-100:200 --split dev-clean:20 --split test-clean:20 --min-seconds 35 --max-seconds 40

An existing split directory is left untouched (delete it to regenerate).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import soundfile as sf

from asr_plugin.files import write_atomic, write_text_atomic
from asr_plugin.user_errors import exit_on_user_error

SAMPLE_RATE = 16000
WORD_SECONDS = 0.3
GAP_SECONDS = 0.05
NUM_WORDS = 400
TONES_PER_AXIS = 20  # word i: low tone i % 20, high tone i // 20
SPEAKERS_PER_SPLIT = 2
CHAPTERS_PER_SPEAKER = 2


def make_words(count: int = NUM_WORDS) -> list[str]:
    """`count` distinct made-up words of 2-3 consonant-vowel syllables (the same list on every call)."""
    rng = np.random.default_rng(1234)
    syllables = [c + v for c in "BDFGKLMNPRSTVZ" for v in "AEIOU"]
    words: dict[str, None] = {}
    while len(words) < count:
        words["".join(rng.choice(syllables, size=int(rng.integers(2, 4))))] = None
    return list(words)


WORDS = make_words()


def _word_audio(word_index: int, pitch: float, rng: np.random.Generator) -> np.ndarray:
    """(WORD_SECONDS * SAMPLE_RATE,) float32: a chord of two tones that identifies the word, then a gap."""
    t = np.arange(int(WORD_SECONDS * SAMPLE_RATE)) / SAMPLE_RATE
    low = pitch * (150 + 40 * (word_index % TONES_PER_AXIS))
    high = pitch * (1100 + 120 * (word_index // TONES_PER_AXIS))  # < 3.6 kHz: under 8 kHz Nyquist
    envelope = np.sin(np.pi * t / WORD_SECONDS)  # no clicks between words
    tone = envelope * (0.3 * np.sin(2 * np.pi * low * t) + 0.2 * np.sin(2 * np.pi * high * t))
    gap = np.zeros(int(GAP_SECONDS * SAMPLE_RATE))
    return np.concatenate([tone + 0.01 * rng.standard_normal(t.shape), gap]).astype(np.float32)


def write_split(root: Path, split: str, count: int, min_seconds: float, max_seconds: float, seed: int) -> int:
    """Writes `count` utterances of `min_seconds`..`max_seconds` to root/split; returns the number written
    (0 when the split directory already exists)."""
    if count < 1:
        raise ValueError(f"{split}: the utterance count must be >= 1, got {count}")
    if not 0 < min_seconds <= max_seconds:
        raise ValueError(f"need 0 < min_seconds <= max_seconds, got {min_seconds} and {max_seconds}")
    split_dir = root / split
    if split_dir.exists():
        print(f"{split_dir} exists, leaving it as it is")
        return 0
    rng = np.random.default_rng([seed, sum(map(ord, split))])
    per_word = WORD_SECONDS + GAP_SECONDS
    transcripts: dict[Path, list[str]] = {}
    for n in range(count):
        speaker, chapter = 100 + n % SPEAKERS_PER_SPLIT, 10 + (n // SPEAKERS_PER_SPLIT) % CHAPTERS_PER_SPEAKER
        pitch = 1.0 + 0.05 * (speaker - 100)
        num_words = max(1, int(rng.uniform(min_seconds, max_seconds) // per_word))
        words = rng.integers(0, len(WORDS), num_words)
        audio = np.concatenate([_word_audio(int(w), pitch, rng) for w in words])
        chapter_dir = split_dir / str(speaker) / str(chapter)
        chapter_dir.mkdir(parents=True, exist_ok=True)
        utt_id = f"{speaker}-{chapter}-{n:04d}"
        write_atomic(
            chapter_dir / f"{utt_id}.flac",
            lambda tmp, audio=audio: sf.write(str(tmp), audio, SAMPLE_RATE, format="FLAC", subtype="PCM_16"),
        )
        line = f"{utt_id} {' '.join(WORDS[w] for w in words)}"
        transcripts.setdefault(chapter_dir / f"{speaker}-{chapter}.trans.txt", []).append(line)
    for path, lines in transcripts.items():
        write_text_atomic(path, "\n".join(lines) + "\n")
    print(f"{split}: wrote {count} utterances of {min_seconds}-{max_seconds} s to {split_dir}")
    return count


def _split_count(text: str) -> tuple[str, int]:
    name, sep, count = text.rpartition(":")
    if not sep or not name or not count.isdigit():
        raise argparse.ArgumentTypeError(f"--split wants NAME:COUNT (e.g. dev-clean:20), got {text!r}")
    return name, int(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="the corpus directory (the LibriSpeech/ folder)")
    parser.add_argument(
        "--split",
        type=_split_count,
        action="append",
        required=True,
        help="NAME:COUNT, repeatable, e.g. train-clean-100:200",
    )
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--max-seconds", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for split, count in args.split:
        write_split(Path(args.root), split, count, args.min_seconds, args.max_seconds, args.seed)


if __name__ == "__main__":
    exit_on_user_error()(main)()
