"""The NeMo-trained reference models, once per test session (tests that use them are marked nemo): the
full-context one of the fine-tuning tests and the cache-aware streaming one of the streaming comparison.

Their ``.nemo`` files are committed (tests/nemo_references/, made by scripts/make_nemo_references.py), so no test
run trains NeMo: the fixtures rebuild the corpus (one per corpus setting), manifests and NeMo's transcripts around them
(`benchmarks.nemo_reference.committed_reference`), and fail naming that script when the reference settings in
the code are no longer those the committed models were trained with."""

from __future__ import annotations

import pytest
from built_once import committed_nemo_reference


def _committed(tmp_path_factory, name: str):
    """Rebuilt once per test run, for every xdist worker (tests/built_once.py `committed_nemo_reference`: one
    mini corpus per corpus setting, the full-context and streaming references speak the same one)."""
    pytest.importorskip("nemo.collections.asr")
    return committed_nemo_reference(tmp_path_factory, name)


@pytest.fixture(scope="session")
def nemo_reference(tmp_path_factory):
    return _committed(tmp_path_factory, "full_context")


@pytest.fixture(scope="session")
def nemo_streaming_reference(tmp_path_factory):
    return _committed(tmp_path_factory, "streaming")
