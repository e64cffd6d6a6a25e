"""Two first runs preparing one empty data directory at once: the second waits for the work directory's lock
(saying so) and reuses what the first made; a file being written is never read as data; temporary files that
killed writers left behind are removed at the next start (`asr_plugin.data.preparation.work_lock`,
`asr_plugin.files`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from built_once import copy_of
from data_helpers import SMALL

from asr_plugin.data import CorpusLayout, CorpusPlan, prepare_corpus, scan_split
from asr_plugin.data.preparation.work_lock import preparation_lock
from asr_plugin.data.sources import MiniCorpusSource
from asr_plugin.files import remove_stale_temporaries, temporary_path

pytestmark = pytest.mark.xdist_group("processes")  # processes of their own, timed against each other
PREPARE = """
import logging, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from asr_plugin.data import CorpusLayout, CorpusPlan, prepare_corpus
from asr_plugin.data.sources import MiniCorpusSource

root, work = sys.argv[1], sys.argv[2]
source = MiniCorpusSource(root, train_splits=("train",), valid_splits=("dev",), test_splits=("test-espeak",), mini_corpus={mini})
plan = CorpusPlan(CorpusLayout(root, work), source, tokenizer_path=None)
print("ready", flush=True)
prepare_corpus(plan, ["manifests"], progress=False)
"""


def test_a_second_preparer_waits_for_the_lock_and_reuses_the_manifests(mini_root, tmp_path):
    root, work = copy_of(mini_root, tmp_path / "corpus"), tmp_path / "work"  # the corpus is made: manifests remain
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    code = PREPARE.format(mini=SMALL)
    with preparation_lock(work):  # both start while a first preparer holds the lock: they queue behind it
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(root), str(work)],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        assert [run.stdout.readline() for run in runs] == ["ready\n"] * 2
        time.sleep(2)  # both are at the lock now
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert all(
        f"waiting for data preparation in {work}: another process (pid {os.getpid()})" in err for _, err in outputs
    ), outputs
    wrote = [out for out, _ in outputs if "train: wrote 24 utterances" in out]
    reused = [out for out, _ in outputs if "train: reusing existing manifest" in out]
    assert len(wrote) == 1 and len(reused) == 1, outputs
    assert not list(work.glob("*.skipped.tsv"))


def test_a_file_being_written_is_not_scanned_as_audio(mini_root, tmp_path):
    root = copy_of(mini_root, tmp_path / "corpus")
    before, skipped = scan_split(root, "dev")
    flac = next((root / "dev").rglob("*.flac"))
    partial = temporary_path(flac)  # another run's write in progress
    partial.write_bytes(b"fLaC half")
    after, skipped_after = scan_split(root, "dev")
    assert [c.path for c in after] == [c.path for c in before] and skipped_after == skipped == []


def test_stale_temporaries_are_removed_at_the_next_start_and_nothing_else(tmp_path):
    root, work = tmp_path / "corpus", tmp_path / "work"
    source = MiniCorpusSource(
        root, train_splits=("train",), valid_splits=("dev",), test_splits=("test-espeak",), mini_corpus=SMALL
    )
    plan = CorpusPlan(CorpusLayout(root, work), source, tokenizer_path=None)
    prepare_corpus(plan, ["manifests"], progress=False)
    flac = next((root / "train").rglob("*.flac"))
    stale = [temporary_path(work / "train.jsonl"), temporary_path(flac)]
    fresh = temporary_path(work / "dev.jsonl")  # a write in progress: too young to be a killed one's
    own = [work / ".notes", work / "train.jsonl.tmp"]  # hidden or tmp-like, but not of the project's naming
    for path in own:
        path.write_text("mine")
    old = time.time() - 3600
    for path in [*stale, *own]:
        os.utime(path, (old, old))
    (work / "train.jsonl").unlink()  # something to make: the next run writes, so it cleans up first
    prepare_corpus(plan, ["manifests"], progress=False)
    assert not any(path.exists() for path in stale)
    assert fresh.exists() and all(path.read_text() == "mine" for path in own)
    assert remove_stale_temporaries(work, older_than_s=0) == [fresh]
