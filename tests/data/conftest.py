"""Fixtures for the data tests: a tiny synthetic mini corpus and a data module prepared on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_helpers import SMALL

from asr_plugin.data import TransducerDataModule, make_mini_librispeech


@pytest.fixture(scope="session")
def mini_root(tmp_path_factory) -> Path:
    """A 40-utterance mini corpus (train 24, dev 8, test 8), made once per session."""
    return make_mini_librispeech(tmp_path_factory.mktemp("mini") / "corpus", **SMALL)


@pytest.fixture(scope="session")
def prepared_module(mini_root, tmp_path_factory) -> TransducerDataModule:
    """A data module over `mini_root` after prepare_data() and setup("fit")."""
    dm = TransducerDataModule(root=str(mini_root), work_dir=str(tmp_path_factory.mktemp("manifests")),
                              corpus="mini", train_splits=["train"], valid_splits=["dev"],
                              test_splits=["dev", "test-piper"], vocab_size=48, max_duration=10.0, num_buckets=3,
                              num_workers=0, prepare_num_workers=1, mini_corpus=SMALL)
    dm.prepare_data()
    dm.setup("fit")
    return dm
