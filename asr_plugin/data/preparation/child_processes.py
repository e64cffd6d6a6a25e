"""Worker processes of data preparation (synthesis, audio checks, statistics) die with the process that started
them.

A preparation killed with SIGKILL (the OOM killer, ``kill -9``, a cluster's hard limit) runs no cleanup: its
pool's workers would go on with work nobody collects, and forked ones hold the preparation lock they inherited
(`asr_plugin.data.preparation.work_lock`), so the next run waits for them. `die_with_parent` is the workers'
initializer: a daemon thread of the worker waits for the preparing process to end (a pidfd on Linux >= 5.3: woken the moment
it ends, and never confused by a reused pid; elsewhere a check every `POLL_S` seconds) and then ends the worker.

Why neither of the usual tools: the parent's death signal (``prctl(PR_SET_PDEATHSIG)``) is sent when the *thread*
that forked the worker ends, and `multiprocessing.Pool` forks replacement workers (``maxtasksperchild``) from a
helper thread that ends when the pool is terminated, which would kill a worker holding the pool's queue lock and
hang the termination; and watching the parent process fails for forkserver workers, whose parent, the
forkserver, stays alive as long as its workers hold the descriptor it waits on.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

POLL_S = 0.5


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def _exit_when_ended(pid: int, pidfd: int | None) -> None:
    if pidfd is not None:
        select.select([pidfd], [], [])  # readable once the process has ended
    else:
        while _alive(pid):
            time.sleep(POLL_S)
    os._exit(1)  # the preparation is gone: nobody collects this worker's results


def die_with_parent(preparing_pid: int, worker_id: int | None = None) -> None:
    """Worker initializer: this process ends as soon as `preparing_pid` (the process whose preparation it serves)
    does, and at once when that process is already gone; SIGTERM ends it (a forked worker would otherwise keep
    the preparing process's handler, and a pool's termination, which sends SIGTERM, would wait for it forever).
    `worker_id` is ignored (a DataLoader's ``worker_init_fn`` is given one)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        pidfd = os.pidfd_open(preparing_pid) if hasattr(os, "pidfd_open") else None
    except ProcessLookupError:
        os._exit(1)
    except OSError:  # a kernel without pidfds
        pidfd = None
    if pidfd is None and not _alive(preparing_pid):
        os._exit(1)
    threading.Thread(target=_exit_when_ended, args=(preparing_pid, pidfd), daemon=True, name="die-with-parent").start()
