"""One preparer per work directory: two first runs preparing the same (empty) data directory at once would both
synthesize the corpus and race on its manifests. `preparation_lock` holds an exclusive lock on
``<work_dir>/.prepare.lock`` (``flock``: released by the kernel when its holder exits, however it exits); a second
run waits for it, logging what it waits for, then finds the files the first made and reuses them."""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = ".prepare.lock"


@contextmanager
def preparation_lock(work_dir: str | os.PathLike, what: str = "data preparation") -> Iterator[Path]:
    """Holds the exclusive lock of `work_dir` (created if needed) for the ``with`` block; yields the lock file.
    Waits, with a warning naming the lock, its holder's process id and `what`, while another process holds it."""
    path = Path(work_dir) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            log.warning(
                "waiting for %s in %s: another process (pid %s) holds %s; its files will be reused",
                what,
                work_dir,
                holder,
                path,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
