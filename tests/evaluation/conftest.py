"""The evaluation tests' tiny mini corpus, prepared once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from built_once import copy_of
from eval_setup import eval_cfg
from hydra.utils import instantiate


@pytest.fixture(scope="session")
def corpus(tiny_corpus, tmp_path_factory):
    """(root, data module) of the tiny mini corpus (a copy of the session's), prepared once."""
    root = tmp_path_factory.mktemp("corpus")
    datamodule = instantiate(eval_cfg(root, root).data)
    copy_of(tiny_corpus, Path(datamodule.root))
    datamodule.prepare_data()
    datamodule.setup("test")
    return root, datamodule
