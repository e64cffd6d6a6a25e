"""The NeMo-trained reference model, once per test session (tests that use it are marked nemo and slow).

``ASR_PLUGIN_TEST_CACHE=<dir>`` keeps it across sessions (`benchmarks.nemo_reference.cached_reference`:
a directory per settings), so a second run skips the NeMo training."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def nemo_reference(tmp_path_factory):
    pytest.importorskip("nemo.collections.asr")
    from benchmarks.nemo_reference import cached_reference

    cache = os.environ.get("ASR_PLUGIN_TEST_CACHE")
    return cached_reference(Path(cache) if cache else tmp_path_factory.mktemp("nemo_reference"))
