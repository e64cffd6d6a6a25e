"""The tiny mini corpus shared by the ONNX export tests that decode speech (synthesized once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from built_once import copy_of
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from onnx_fixtures import CONF_DIR
from tiny_models import TINY_CORPUS

from asr_plugin.audio import load_audio
from asr_plugin.data import read_manifest


@pytest.fixture(scope="session")
def corpus(tiny_corpus, tmp_path_factory):
    """(data module, 16 utterances of the tiny mini corpus's dev and test sets as float waveforms; a copy of the
    session's corpus)."""
    root = tmp_path_factory.mktemp("corpus")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="eval",
            # the log-mel front end (global statistics): what test_onnx_sherpa.py's adapter tests adapt, not the default
            overrides=[
                *TINY_CORPUS,
                "data.frontend=null",
                f"paths.root_dir={root}",
                f"output_dir={root}/eval",
                f"checkpoint={root}",
            ],
        )
    datamodule = instantiate(cfg.data)
    copy_of(tiny_corpus, Path(datamodule.root))
    datamodule.prepare_data()
    datamodule.setup("test")
    entries = [e for path in datamodule.test_manifests.values() for e in read_manifest(path)]
    return datamodule, [load_audio(e.path).numpy() for e in entries]
