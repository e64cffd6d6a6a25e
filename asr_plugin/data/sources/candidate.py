"""What a corpus reader lists: utterances not yet checked against their audio, and what it left out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """An utterance a source lists, not yet checked against its audio.

    Attributes:
        id: unique within its split.
        path: absolute audio path.
        text: the transcript as written (the tokenizer normalises it).
        offset: start of the segment in seconds; None = the whole file.
        duration: seconds the source states (a segment's length, or the file's); None = the file's own.
        speaker: optional speaker label.
        where: where the source read it (e.g. "train.json:12"), for messages; "" = the audio path.
    """

    id: str
    path: str
    text: str
    offset: float | None = None
    duration: float | None = None
    speaker: str | None = None
    where: str = ""


@dataclass(frozen=True)
class Skipped:
    """Something left out of the manifest, where it was (a path, or manifest:line) and why."""

    path: str
    reason: str
