"""Manifests: one JSON object per line with the keys id, path, duration (seconds) and text, and optionally
offset (seconds: the utterance is the segment [offset, offset + duration) of a longer file) and speaker."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from asr_plugin.audio.reading import load_audio, stat_regular_file
from asr_plugin.files import write_text_atomic

MANIFEST_KEYS = ("id", "path", "duration", "text")


@dataclass(frozen=True)
class ManifestEntry:
    """One utterance: `path` is an absolute audio path, `duration` in seconds, `text` as written (the
    tokenizer normalises it). `offset` None: the whole file; a number: the segment of `duration` seconds
    from `offset` (NeMo's manifests and lhotse's cuts). `speaker` is optional and informative."""

    id: str
    path: str
    duration: float
    text: str
    offset: float | None = None
    speaker: str | None = None

    def load_audio(self, sample_rate: int) -> torch.Tensor:
        """The utterance's (N,) float32 audio at `sample_rate` (resampled, averaged to mono)."""
        if self.offset is None:
            return load_audio(self.path, sample_rate)
        return load_audio(self.path, sample_rate, self.offset, self.duration)


def write_manifest(entries: Iterable[ManifestEntry], path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Writes `entries` as JSON lines to `path`; an existing file is kept unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"manifest {path} exists; pass overwrite=True (--overwrite) to replace it")
    # offset and speaker only where set: a LibriSpeech manifest stays {id, path, duration, text}
    records = (
        {key: value for key, value in asdict(entry).items() if key in MANIFEST_KEYS or value is not None}
        for entry in entries
    )
    lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in records]
    return write_text_atomic(path, "".join(lines))


def _parse_line(line: str, where: str) -> ManifestEntry:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [key for key in MANIFEST_KEYS if key not in record]
    if missing:
        raise ValueError(f"{where}: missing key(s) {missing}")
    duration = record["duration"]
    if not isinstance(duration, (int, float)) or not math.isfinite(duration) or duration <= 0:
        raise ValueError(f"{where}: duration must be a positive number, got {duration!r}")
    offset = record.get("offset")
    if offset is not None and (not isinstance(offset, (int, float)) or not math.isfinite(offset) or offset < 0):
        raise ValueError(f"{where}: offset must be a number >= 0 or null, got {offset!r}")
    speaker = record.get("speaker")
    return ManifestEntry(
        id=str(record["id"]),
        path=str(record["path"]),
        duration=float(duration),
        text=str(record["text"]),
        offset=None if offset is None else float(offset),
        speaker=None if speaker is None else str(speaker),
    )


def read_manifest(path: str | os.PathLike) -> list[ManifestEntry]:
    """Reads a manifest written by `write_manifest`; a bad line raises ValueError naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"manifest {path} does not exist")
    entries = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                entries.append(_parse_line(line, f"{path}:{number}"))
    return entries


def _stat_problem(path: str) -> str | None:
    status, problem = stat_regular_file(path)
    if status is not None and status.st_size == 0:
        return "empty (0 bytes)"
    return problem


def audio_problems(entries: Sequence[ManifestEntry], num_threads: int = 16) -> list[tuple[ManifestEntry, str]]:
    """(entry, "missing" / "empty (0 bytes)" / "cannot be read (...)" / "a directory, ...") for every entry whose
    audio file does not exist, is empty or is no regular file, in manifest order. One `os.stat` per file, in `num_threads` threads (the calls
    release the GIL: on a network file system, where one stat waits for a round trip, the threads overlap
    them). docs/data.md gives its speed on a 281k-entry manifest."""
    paths = [entry.path for entry in entries]
    if num_threads <= 1 or len(paths) < 2 * num_threads:
        problems = list(map(_stat_problem, paths))
    else:  # a few chunks per thread: one future per file would cost more than the stat itself
        size = -(-len(paths) // (4 * num_threads))
        chunks = [paths[i : i + size] for i in range(0, len(paths), size)]
        with ThreadPoolExecutor(num_threads) as pool:
            problems = [p for chunk in pool.map(lambda c: list(map(_stat_problem, c)), chunks) for p in chunk]
    return [(entry, problem) for entry, problem in zip(entries, problems) if problem is not None]
