"""Fixtures of the training tests (the helpers they use are in train_configs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import two_nodes
from built_once import built_once
from omegaconf import DictConfig
from train_configs import TINY_RUN, compose_train, prepare_tiny_data


@pytest.fixture(scope="session")
def data_dir(tiny_corpus, tmp_path_factory) -> Path:
    """paths.data_dir holding the tiny mini corpus, manifests, tokenizer and stats (prepared once per test run)."""
    return built_once(tmp_path_factory, "tiny_data_dir", lambda path: prepare_tiny_data(tiny_corpus, path))


@pytest.fixture
def tiny_run(data_dir, tmp_path):
    """compose(overrides) -> conf/train.yaml with TINY_RUN settings, data in `data_dir`, outputs in tmp_path."""

    def compose(overrides: list[str] = (), run: str = "run") -> DictConfig:
        cfg = compose_train(TINY_RUN + [f"paths.data_dir={data_dir}", *overrides], tmp_path=tmp_path)
        cfg.paths.output_dir = f"{tmp_path}/logs/{cfg.task_name}/runs/{run}"
        return cfg

    return compose


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a gloo rendezvous)."""
    return two_nodes.free_port()
