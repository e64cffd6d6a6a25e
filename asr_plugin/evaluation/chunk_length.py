"""How long the chunks of a long file are by default when it is transcribed offline (``transcribe.py``
``--chunk-seconds``): the model's longest training utterance, at most `MAX_CHUNK_SECONDS`. A model decodes
audio about as long as what it was trained on: one trained on 2-s clips lost most of a 65-s file decoded in 20-s
chunks and transcribed it in 4-s ones. Files that record no training durations (checkpoints written before
they were recorded, ``.nemo`` and other formats) keep `MAX_CHUNK_SECONDS`, and the reason says so."""

from __future__ import annotations

import os
from pathlib import Path

from asr_plugin.formats import format_of
from asr_plugin.formats.checkpoint import checkpoint_records
from asr_plugin.formats.checkpoint.format import LightningCheckpointFormat
from asr_plugin.formats.torch_file import load_torch_file
from asr_plugin.training.run_start import LONGEST_UTTERANCE_RECORD

MAX_CHUNK_SECONDS = 30.0  # about LibriSpeech's longest training utterance, and NeMo's long-audio chunking


def recorded_longest_utterance(path: str | os.PathLike) -> float | None:
    """Seconds of the longest training utterance the model file `path` records; None when it records none.
    ValueError naming the file for a record that is not a positive number of seconds."""
    path = Path(path)
    if format_of(path).name != LightningCheckpointFormat.name:
        return None
    checkpoint = load_torch_file(path)  # memory-mapped: only the records are read here
    longest = (
        checkpoint_records(checkpoint, str(path)).get(LONGEST_UTTERANCE_RECORD)
        if isinstance(checkpoint, dict)
        else None
    )
    if longest is None:
        return None
    if isinstance(longest, bool) or not isinstance(longest, (int, float)) or not longest > 0:
        raise ValueError(f"{path}: {LONGEST_UTTERANCE_RECORD}={longest!r} is not a positive number of seconds")
    return float(longest)


def default_chunk_seconds(path: str | os.PathLike) -> tuple[float, str]:
    """(the chunk length in seconds for the model file `path`, why: a phrase to print)."""
    longest = recorded_longest_utterance(path)
    if longest is None:
        return MAX_CHUNK_SECONDS, f"{path} records no training durations (an older checkpoint or another format)"
    if longest > MAX_CHUNK_SECONDS:
        return (
            MAX_CHUNK_SECONDS,
            f"the longest training utterance is {longest:.1f} s, capped at {MAX_CHUNK_SECONDS:g} s",
        )
    return longest, "the longest training utterance"
