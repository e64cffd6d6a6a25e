"""Atomic file writes: a file under its final name is always complete, even after a crash or a full disk.

The recipe is the one databases use: write to a temporary file in the same directory (so the rename never
crosses file systems and never becomes a copy), flush and fsync it (its data is on disk before its name
is), rename it onto the final name (atomic on POSIX: readers see the old file or the new one, never half
of one), then fsync the directory (the rename itself survives a power cut). On any failure, including
KeyboardInterrupt, the temporary file is removed and the previous file under the final name is untouched.
A process killed with SIGKILL mid-write leaves only its hidden temporary file (``.<name>.<random>.tmp<suffix>``):
readers never take it as data (`is_temporary`), and `remove_stale_temporaries` removes old ones at the next start.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

# `temporary_path`'s names: hidden, the final name, 8 hex digits, ".tmp", the final suffix.
TEMPORARY_NAME = re.compile(r"\..+\.[0-9a-f]{8}\.tmp(\.[^.]+)?")
# A temporary file this old is a killed writer's: the project's writes of one file take seconds (a tokenizer on
# LibriSpeech minutes, under the preparation lock, which keeps other preparers out of its directory).
STALE_AFTER_S = 60.0

# fsync of a directory is refused by a few file systems; the rename is then as durable as they make it
_DIRECTORY_FSYNC_UNSUPPORTED = (errno.EINVAL, errno.ENOTSUP, errno.EBADF)


def fsync_path(path: str | os.PathLike) -> None:
    """Flushes a file's data, or a directory's entries, to the storage device."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if not (Path(path).is_dir() and err.errno in _DIRECTORY_FSYNC_UNSUPPORTED):
            raise
    finally:
        os.close(fd)


def temporary_path(path: str | os.PathLike) -> Path:
    """Creates and returns an empty, hidden temporary file next to `path` that keeps its suffix (writers that
    infer a format from the suffix still work). Unlike `tempfile.mkstemp` (mode 0600) it gets the usual
    permissions of new files (0666 less the umask), which the final file then keeps."""
    path = Path(path)
    while True:
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp{path.suffix}")
        try:
            os.close(os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            continue
        return candidate


def write_atomic(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Calls `write(tmp_path)` to fill a temporary file next to `path`, fsyncs it, renames it onto `path`
    and fsyncs the directory. Returns `path`.

    If `write` (or anything after it) raises, the temporary file is removed and an existing `path` keeps
    its previous content. `write` may close the file in any way (e.g. ``torch.save(obj, tmp_path)``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        write(tmp)
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)
    return path


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Writes `data` to `path` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_bytes(data))


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Writes `text` (UTF-8) to `path` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def is_temporary(path: str | os.PathLike) -> bool:
    """Whether `path` is named as `temporary_path` names them (a write in progress, or a killed one's)."""
    return TEMPORARY_NAME.fullmatch(Path(path).name) is not None


def remove_stale_temporaries(directory: str | os.PathLike, older_than_s: float = STALE_AFTER_S) -> list[Path]:
    """Removes the temporary files of `temporary_path`'s naming under `directory` (recursively) last modified
    more than `older_than_s` ago, left by killed writers; returns them. Other files are never touched."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    now, removed = time.time(), []
    for path in directory.rglob(".*.tmp*"):
        try:
            if is_temporary(path) and path.is_file() and now - path.stat().st_mtime > older_than_s:
                path.unlink()
                removed.append(path)
        except FileNotFoundError:  # its writer renamed or removed it meanwhile
            continue
    if removed:
        log.info("removed %d stale temporary file(s) of killed writers under %s", len(removed), directory)
    return removed
