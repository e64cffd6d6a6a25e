"""conf/model/parakeet_rnnt_1b.yaml: a Parakeet-RNNT-1.1B-sized FastConformer-RNNT (random weights) with
exactly the parameters of NeMo's own modules at the same sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from nemo_models import nemo_parameter_counts
from omegaconf import OmegaConf

from asr_plugin.models import build_transducer

PRESET = Path(__file__).resolve().parents[2] / "conf" / "model" / "parakeet_rnnt_1b.yaml"
VOCAB = 1025  # 1024 pieces + blank
# NeMo 3.0's ConformerEncoder + RNNTDecoder + RNNTJoint at these sizes (the nemo test below rebuilds it)
NEMO_PARAMETERS = {"encoder": 1_061_489_664, "predictor": 7_219_840, "joint": 1_723_265}


def preset_model():
    config = OmegaConf.to_container(OmegaConf.load(PRESET))
    config.pop("_target_")
    config["vocab_size"] = VOCAB
    with torch.device("meta"):  # sizes only: 1.07 B parameters are not allocated
        return build_transducer(**config), config


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_preset_has_the_parakeet_rnnt_1b_architecture_and_size():
    model, config = preset_model()
    assert (config["d_model"], config["num_layers"], config["num_heads"]) == (1024, 42, 8)
    assert (config["subsampling"], config["subsampling_factor"], config["subsampling_channels"]) == (
        "dw_striding",
        8,
        256,
    )
    assert (config["predictor_dim"], config["predictor_layers"], config["joint_dim"]) == (640, 2, 640)
    parts = {name: count(getattr(model, name)) for name in NEMO_PARAMETERS}
    assert parts == NEMO_PARAMETERS
    assert count(model) == 1_070_432_769


@pytest.mark.slow
@pytest.mark.nemo
def test_parameter_count_equals_nemos_modules_at_the_same_sizes():
    pytest.importorskip("nemo.collections.asr")
    _, config = preset_model()
    assert nemo_parameter_counts(config, VOCAB) == NEMO_PARAMETERS
