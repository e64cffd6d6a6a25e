"""Reader for the LibriSpeech layout ROOT/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac
with one <speaker>-<chapter>.trans.txt per chapter ("<utt id> <TEXT>" lines).

Scanning never writes anything: it returns the utterances found (transcripts as written, whitespace
collapsed) and a list of skipped files with reasons.
"""

from __future__ import annotations

import os
from pathlib import Path

from asr_plugin.data.sources.candidate import Candidate, Skipped
from asr_plugin.files import is_temporary

LIBRISPEECH_SPLITS = (
    "train-clean-100",
    "train-clean-360",
    "train-other-500",
    "dev-clean",
    "dev-other",
    "test-clean",
    "test-other",
)
AUDIO_SUFFIX = ".flac"


def _read_transcript_file(path: Path) -> dict[str, str]:
    """{utterance id: text with single spaces}; the text may be empty. The text is kept as written: the
    tokenizer normalises it (and counts what that changes)."""
    texts: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            utt_id, _, text = line.strip().partition(" ")
            texts[utt_id] = " ".join(text.split())
    return texts


def _scan_chapter(chapter_dir: Path, speaker: str, skipped: list[Skipped]) -> list[Candidate]:
    chapter = chapter_dir.name
    transcript = chapter_dir / f"{speaker}-{chapter}.trans.txt"
    audio = {
        p.name[: -len(AUDIO_SUFFIX)]: p
        for p in chapter_dir.iterdir()
        if p.name.endswith(AUDIO_SUFFIX) and not is_temporary(p)
    }  # another writer's file in progress is no data
    if not transcript.is_file():
        skipped.extend(Skipped(str(p), f"no transcript file {transcript.name}") for p in sorted(audio.values()))
        return []
    texts = _read_transcript_file(transcript)
    found = []
    for utt_id in sorted(audio):
        if texts.get(utt_id):
            found.append(Candidate(utt_id, str(audio[utt_id].resolve()), texts[utt_id], speaker=speaker))
        elif utt_id in texts:
            skipped.append(Skipped(str(audio[utt_id]), f"empty transcript line for {utt_id} in {transcript.name}"))
        else:
            skipped.append(Skipped(str(audio[utt_id]), f"no line for {utt_id} in {transcript.name}"))
    skipped.extend(
        Skipped(str(transcript), f"transcript line {utt_id} has no audio file")
        for utt_id in sorted(set(texts) - set(audio))
    )
    return found


def scan_split(root: str | os.PathLike, split: str) -> tuple[list[Candidate], list[Skipped]]:
    """Lists every utterance of ROOT/split (sorted by id) and the files that cannot be used.

    Raises FileNotFoundError naming the directory when the split does not exist.
    """
    split_dir = Path(root) / split
    if not split_dir.is_dir():
        raise FileNotFoundError(f"split directory {split_dir} does not exist (root={root}, split={split})")
    candidates: list[Candidate] = []
    skipped: list[Skipped] = []
    for speaker_dir in sorted(p for p in split_dir.iterdir() if p.is_dir()):
        for chapter_dir in sorted(p for p in speaker_dir.iterdir() if p.is_dir()):
            candidates.extend(_scan_chapter(chapter_dir, speaker_dir.name, skipped))
    candidates.sort(key=lambda c: c.id)
    return candidates, skipped
