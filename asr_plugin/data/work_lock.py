"""One preparer per work directory: two first runs preparing the same (empty) data directory at once would both
synthesize the corpus and race on its manifests. `preparation_lock` holds an exclusive lock on
``<work_dir>/.prepare.lock`` (``flock``: released by the kernel when its holder exits, however it exits); a second
run waits for it, logging what it waits for, then finds the files the first made and reuses them.

Only the process that took the lock holds it: a child forked while it is held (a synthesis or loader worker)
closes its inherited copy of the lock's descriptor at once (``os.register_at_fork``), so a worker that outlives a
killed preparation never keeps the next run waiting (the workers also die with it: `asr_plugin.data.child_processes`).
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
# The descriptors of the locks this process holds, closed in every child it forks (see the module docstring).
_HELD_BY_THIS_PROCESS: set[int] = set()


def _close_inherited_locks() -> None:
    for fd in _HELD_BY_THIS_PROCESS:
        try:
            os.close(fd)  # the child's copy only: the parent's descriptor keeps the lock
        except OSError:
            pass
    _HELD_BY_THIS_PROCESS.clear()


os.register_at_fork(after_in_child=_close_inherited_locks)


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
    opener = os.getpid()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            log.warning(
                "waiting for %s in %s: another process (pid %s) holds %s; its files will be reused%s",
                what,
                work_dir,
                holder,
                path,
                _reimported_main_hint(),
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        _HELD_BY_THIS_PROCESS.add(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        if os.getpid() == opener:  # a forked child that got here closed its copy when it was forked
            _HELD_BY_THIS_PROCESS.discard(fd)
            os.close(fd)  # releases the lock
