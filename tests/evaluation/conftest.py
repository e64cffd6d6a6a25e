"""The evaluation tests' tiny mini corpus, prepared once per session."""

from __future__ import annotations

import pytest
from eval_setup import eval_cfg
from hydra.utils import instantiate


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """(root, data module) of the tiny mini corpus, prepared once."""
    root = tmp_path_factory.mktemp("corpus")
    datamodule = instantiate(eval_cfg(root, root).data)
    datamodule.prepare_data()
    datamodule.setup("test")
    return root, datamodule
