"""Fixtures shared by every test directory (pytest puts tests/ on sys.path for this file, so test files import
the shared helpers in tiny_models.py by name), and the suite's run-wide settings: the per-test time budget
(duration_budget.py) and one thread per xdist worker."""

from __future__ import annotations

import os

# Under pytest-xdist (scripts/test.sh runs `-n auto`) each worker gets its share of the cores: two workers of two
# threads each on a 2-core machine slow each other far more than twice. Set before torch is imported, so that
# subprocesses that tests start inherit it too.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

import pytest  # noqa: E402
from built_once import built_once  # noqa: E402
from tiny_models import TINY_CORPUS_SIZES, CharTokenizer  # noqa: E402

pytest_plugins = ["duration_budget"]


@pytest.fixture
def tokenizer() -> CharTokenizer:
    return CharTokenizer()


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory):
    """The tiny mini corpus (`TINY_CORPUS_SIZES`: train 24, dev 8, each test split 8), synthesised once per test
    run for every test folder and xdist worker. Shared: copy it (`built_once.copy_of`) into a data directory
    before preparing there; the data module then finds it complete and synthesises nothing."""
    from asr_plugin.data import make_mini_librispeech

    return built_once(
        tmp_path_factory,
        "tiny_corpus",
        lambda directory: make_mini_librispeech(directory, **TINY_CORPUS_SIZES, progress=False),
    )
