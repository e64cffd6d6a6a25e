"""One preparer per work directory: two first runs preparing the same (empty) data directory at once would both
synthesize the corpus and race on its manifests. `preparation_lock` holds an exclusive lock on
``<work_dir>/.prepare.lock``; a second run waits for it, logging what it waits for, then finds the files the first
made and reuses them.

The lock is a POSIX record lock (``lockf``), not ``flock``: the kernel releases it when its holder exits, however it
exits, and, unlike an ``flock``, a child forked while it is held (a synthesis or loader worker) does not hold it,
so a worker that outlives a killed preparation never keeps the next run waiting (the workers also die with it:
`asr_plugin.data.preparation.child_processes`). A record lock belongs to the process: it is not taken twice by one
process, and closing any descriptor of the file in the holder would release it, so nothing else here opens the lock file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = ".prepare.lock"


def _reimported_main_hint() -> str:
    """A hint when this process is a spawn or forkserver worker importing the main script again (runpy runs it as
    ``__mp_main__``, which becomes ``__main__`` when the import is done): then the lock's holder is most likely
    the script's own first run, waiting for this process to start."""
    if sys.modules.get("__mp_main__") in (None, sys.modules.get("__main__")):
        return ""
    return (
        "; this process is a worker that multiprocessing started by importing the main script again: a script that "
        "prepares data or calls train(cfg) at import time waits for itself here, put that code under "
        '`if __name__ == "__main__":`'
    )


@contextmanager
def preparation_lock(work_dir: str | os.PathLike, what: str = "data preparation") -> Iterator[Path]:
    """Holds the exclusive lock of `work_dir` (created if needed) for the ``with`` block; yields the lock file.
    Waits, with a warning naming the lock, its holder's process id and `what`, while another process holds it."""
    path = Path(work_dir) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: another process holds it
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            log.warning(
                "waiting for %s in %s: another process (pid %s) holds %s; its files will be reused%s",
                what,
                work_dir,
                holder,
                path,
                _reimported_main_hint(),
            )
            fcntl.lockf(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
