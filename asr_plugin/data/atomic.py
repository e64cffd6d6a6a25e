"""Atomic file writes: a reader (or a second rank preparing the same data) never sees half a file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Calls `write(tmp_path)` on a temporary file next to `path`, then renames it onto `path`.

    The temporary file keeps `path`'s suffix so writers that infer a format from it still work.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Writes `text` (UTF-8) to `path` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
