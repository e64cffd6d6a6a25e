"""The evaluation tests' tiny mini corpus, prepared once per session, and an untrained model of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from built_once import copy_of
from eval_setup import eval_cfg
from hydra.utils import instantiate
from test_evaluation_recipe import save_module_checkpoint


@pytest.fixture(scope="session")
def corpus(tiny_corpus, tmp_path_factory):
    """(root, data module) of the tiny mini corpus (a copy of the session's), prepared once."""
    root = tmp_path_factory.mktemp("corpus")
    datamodule = instantiate(eval_cfg(root, root).data)
    copy_of(tiny_corpus, Path(datamodule.root))
    datamodule.prepare_data()
    datamodule.setup("test")
    return root, datamodule


@pytest.fixture(scope="session")
def checkpoint(corpus, tmp_path_factory):
    """An untrained model of the corpus, saved as training saves it (the fusion tests' model)."""
    _, datamodule = corpus
    path = tmp_path_factory.mktemp("untrained") / "model.ckpt"
    save_module_checkpoint(path, datamodule, seed=0, epoch=0, step=1)
    return path
