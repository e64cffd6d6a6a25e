"""The NeMo-trained reference models, once per test session (tests that use them are marked nemo and slow): the
full-context one of the fine-tuning tests and the cache-aware streaming one of the streaming comparison.

``ASR_PLUGIN_TEST_CACHE=<dir>`` keeps them across sessions (`benchmarks.nemo_reference.cached_reference`:
a directory per settings), so a second run skips the NeMo training."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _cached(tmp_path_factory, name: str, settings=None):
    pytest.importorskip("nemo.collections.asr")
    from benchmarks.nemo_reference import ReferenceSettings, cached_reference

    cache = os.environ.get("ASR_PLUGIN_TEST_CACHE")
    return cached_reference(Path(cache) if cache else tmp_path_factory.mktemp(name), settings or ReferenceSettings())


@pytest.fixture(scope="session")
def nemo_reference(tmp_path_factory):
    return _cached(tmp_path_factory, "nemo_reference")


@pytest.fixture(scope="session")
def nemo_streaming_reference(tmp_path_factory):
    pytest.importorskip("nemo.collections.asr")
    from benchmarks.nemo_reference import StreamingReferenceSettings

    return _cached(tmp_path_factory, "nemo_streaming_reference", StreamingReferenceSettings())
