"""Manifests: one JSON object per line with the keys id, path, duration (seconds) and text."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from asr_plugin.data.atomic import write_text_atomic

MANIFEST_KEYS = ("id", "path", "duration", "text")


@dataclass(frozen=True)
class ManifestEntry:
    """One utterance: `path` is an absolute audio path, `duration` in seconds, `text` normalised."""

    id: str
    path: str
    duration: float
    text: str


def write_manifest(entries: Iterable[ManifestEntry], path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Writes `entries` as JSON lines to `path`; an existing file is kept unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"manifest {path} exists; pass overwrite=True (--overwrite) to replace it")
    lines = [json.dumps(asdict(entry), ensure_ascii=False) + "\n" for entry in entries]
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
    if not isinstance(duration, (int, float)) or duration <= 0:
        raise ValueError(f"{where}: duration must be a positive number, got {duration!r}")
    return ManifestEntry(id=str(record["id"]), path=str(record["path"]), duration=float(duration),
                         text=str(record["text"]))


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
