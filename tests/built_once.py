"""Things a test run builds once and every test shares, also across pytest-xdist's worker processes: the tiny
mini corpus, a trained tiny run with step checkpoints (tests/conftest.py's session fixtures).

`built_once(tmp_path_factory, name, build)` calls ``build(directory)`` the first time any process of this test
run asks for `name`, under a file lock in the run's shared temporary folder (the parent of each xdist worker's
own basetemp; the basetemp itself without xdist), and returns the directory to everyone after. A build that
fails leaves no half-built result behind: the next process to ask builds it again. What is built is shared:
tests copy it (`copy_of`) before changing anything in it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

DONE = ".built"


def shared_root(tmp_path_factory) -> Path:
    """The folder every process of this test run sees: the parent of xdist's per-worker basetemp
    (``<run>/popen-gw0``); the basetemp itself in a pytest without xdist, also one that a worker's test started
    (it inherits the worker's environment, not its basetemp)."""
    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return base.parent if worker and base.name == f"popen-{worker}" else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """`root/name` after ``build(root/name)`` ran once in this test run (whichever process came first)."""
    root = shared_root(tmp_path_factory)
    directory = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (directory / DONE).exists():
            shutil.rmtree(directory, ignore_errors=True)  # a build that failed half-way
            directory.mkdir(parents=True)
            build(directory)
            (directory / DONE).touch()
    return directory


def copy_of(source: Path, destination: Path) -> Path:
    """A private copy of a shared build (without its marker) at `destination`."""
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns(DONE), dirs_exist_ok=True)
    return destination


def committed_nemo_reference(tmp_path_factory, name: str):
    """The committed NeMo-trained reference `name` (tests/nemo_references, `benchmarks.nemo_reference`) with its
    corpus, manifests and NeMo's transcripts rebuilt once per test run (needs NeMo). References of the same corpus
    settings share one corpus, synthesised once (a minute of espeak-ng and Piper)."""
    from benchmarks.nemo_reference import (
        COMMITTED_REFERENCES,
        committed_reference,
        corpus_key,
        load_reference,
        reference_corpus,
    )

    settings = COMMITTED_REFERENCES[name]
    shared = built_once(
        tmp_path_factory,
        f"nemo_reference_corpus_{corpus_key(settings)}",
        lambda directory: reference_corpus(directory / "corpus", settings),
    )
    return load_reference(
        built_once(
            tmp_path_factory, name, lambda directory: committed_reference(directory, name, corpus=shared / "corpus")
        )
    )
