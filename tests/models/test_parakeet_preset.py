"""conf/model/parakeet_rnnt_1b.yaml: a Parakeet-RNNT-1.1B-sized FastConformer-RNNT (random weights) with
exactly the parameters of NeMo's own modules at the same sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
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
    from nemo.collections.asr.modules import ConformerEncoder, RNNTDecoder, RNNTJoint

    _, config = preset_model()
    d_model = config["d_model"]
    encoder = ConformerEncoder(
        feat_in=config["input_dim"],
        feat_out=-1,
        n_layers=config["num_layers"],
        d_model=d_model,
        subsampling=config["subsampling"],
        subsampling_factor=config["subsampling_factor"],
        subsampling_conv_channels=config["subsampling_channels"],
        ff_expansion_factor=config["ffn_dim"] // d_model,
        self_attention_model="rel_pos",
        n_heads=config["num_heads"],
        att_context_size=[-1, -1],
        xscaling=config["xscaling"],
        untie_biases=True,
        pos_emb_max_len=5000,
        conv_kernel_size=config["conv_kernel_size"],
        conv_norm_type="batch_norm",
        dropout=config["dropout"],
    )
    decoder = RNNTDecoder(
        prednet=dict(pred_hidden=config["predictor_dim"], pred_rnn_layers=config["predictor_layers"]),
        vocab_size=VOCAB - 1,
        blank_as_pad=True,
    )
    joint = RNNTJoint(
        jointnet=dict(
            encoder_hidden=d_model,
            pred_hidden=config["predictor_dim"],
            joint_hidden=config["joint_dim"],
            activation=config["joint_activation"],
        ),
        num_classes=VOCAB - 1,
    )
    assert {"encoder": count(encoder), "predictor": count(decoder), "joint": count(joint)} == NEMO_PARAMETERS
