"""A preparation killed with SIGKILL leaves nothing running: its synthesis and audio-check workers die with it, the
preparation lock is free for the next run at once (`asr_plugin.data.preparation.child_processes`,
`asr_plugin.data.preparation.work_lock`), and a script that prepares at import time is told why it waits for itself."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asr_plugin.data.preparation.work_lock import LOCK_NAME, preparation_lock

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.xdist_group("processes"),
]

SYNTHESIS = """
import sys
from asr_plugin.data import CorpusLayout, CorpusPlan, prepare_corpus
from asr_plugin.data.sources import MiniCorpusSource
root, work = sys.argv[1], sys.argv[2]
mini = dict(n_train=300, n_dev=8, n_test=8, seed=0, workers=2)
source = MiniCorpusSource(root, train_splits=("train",), valid_splits=("dev",), test_splits=(), mini_corpus=mini)
prepare_corpus(CorpusPlan(CorpusLayout(root, work), source, tokenizer_path=None), ["manifests"])
"""

AUDIO_CHECKS = """
import sys
from asr_plugin.data.sources.candidate import Candidate
from asr_plugin.data.preparation.prepare import check_candidates
from asr_plugin.data.preparation.work_lock import preparation_lock
work, flac = sys.argv[1], sys.argv[2]
with preparation_lock(work):
    check_candidates([Candidate(str(i), flac, "A") for i in range(20_000)], num_workers=2, full_check=True)
"""


def _children() -> dict[int, int]:
    """{pid: parent pid} of every process."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(stat.parent.name)] = int(fields[1])
    return found


def _descendants(pid: int) -> set[int]:
    parents = _children()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _lock_is_free(work: Path) -> bool:
    """Whether another process holds the preparation lock (a record lock, as `preparation_lock` takes it)."""
    fd = os.open(work / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        return False
    finally:
        os.close(fd)
    return True


def _kill_when(code: str, args: list[str], started: str, workers: int, tmp_path: Path) -> set[int]:
    """Runs `code` until its stderr matches the pattern `started` and it has `workers` descendants, kills it
    with SIGKILL; returns its descendants of that moment."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err:
        run = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not re.search(started, err_path.read_text()) or len(_descendants(run.pid)) < workers:
            assert run.poll() is None and time.monotonic() < deadline, err_path.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)  # the workers are busy now
        descendants = _descendants(run.pid)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    return descendants


def _gone_within(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


@pytest.mark.slow
def test_synthesis_workers_die_with_a_killed_preparation_and_free_the_lock(tmp_path):
    root, work = tmp_path / "corpus", tmp_path / "work"
    workers = _kill_when(SYNTHESIS, [str(root), str(work)], "synthesizing speech with piper: 0/", 2, tmp_path)
    assert workers
    try:
        assert _gone_within(workers, 5.0) == set()
        deadline = time.monotonic() + 5.0
        while not _lock_is_free(work):
            assert time.monotonic() < deadline, "the killed preparation's lock is still held"
            time.sleep(0.1)
        with preparation_lock(work):  # a second preparation takes it
            assert (work / LOCK_NAME).read_text().strip() == str(os.getpid())
    finally:
        for pid in _alive(workers):
            os.kill(pid, signal.SIGKILL)


def test_audio_check_workers_die_with_a_killed_preparation(tmp_path):
    from data_helpers import write_flac

    work, flac = tmp_path / "work", write_flac(tmp_path / "a.flac", 5.0)
    # killed once the forkserver's two workers have checked some audio (they take a while to import)
    workers = _kill_when(AUDIO_CHECKS, [str(work), str(flac)], r"checking audio: [1-9]\d*/", 3, tmp_path)
    try:
        assert _gone_within(workers, 5.0) == set()
        assert _lock_is_free(work)
    finally:
        for pid in _alive(workers):
            os.kill(pid, signal.SIGKILL)


def test_a_forked_child_does_not_hold_its_parents_lock(tmp_path):
    with preparation_lock(tmp_path):
        child = os.fork()
        if child == 0:  # the child: sleeps, keeping whatever descriptors it inherited
            time.sleep(30)
            os._exit(0)
    try:
        assert _lock_is_free(tmp_path)  # released by the parent although the child still runs
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


UNGUARDED_SCRIPT = """
from concurrent.futures import ProcessPoolExecutor
import multiprocessing, os
from asr_plugin.data.preparation.work_lock import preparation_lock
with preparation_lock(os.environ["WORK"]):
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
        print(list(pool.map(abs, [-1])))
"""


def test_a_script_that_prepares_at_import_time_is_told_why_it_waits_for_itself(tmp_path):
    script = tmp_path / "unguarded.py"  # no `if __name__ == "__main__":`: the forkserver imports it again
    script.write_text(UNGUARDED_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "WORK": str(tmp_path / "work")}
    run = subprocess.Popen(
        [sys.executable, str(script)], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        line = ""
        while "waiting for data preparation" not in line:
            line = run.stderr.readline()
            assert line and time.monotonic() < deadline
        assert 'put that code under `if __name__ == "__main__":`' in line, line
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
