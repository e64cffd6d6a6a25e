"""conf/model/fastconformer_streaming.yaml (NeMo's cache-aware streaming FastConformer size, with exactly the
parameters of NeMo's own modules) and conf/model/tiny_streaming.yaml (the CPU demo's size)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from nemo_models import nemo_parameter_counts
from omegaconf import OmegaConf

from asr_plugin.models import build_transducer
from asr_plugin.models.streaming import encode_in_chunks

CONF = Path(__file__).resolve().parents[2] / "conf" / "model"
VOCAB = 1025  # 1024 pieces + blank
# NeMo 3.0's ConformerEncoder + RNNTDecoder + RNNTJoint at the NeMo-sized preset's sizes (the nemo test rebuilds it)
NEMO_PARAMETERS = {"encoder": 108_893_184, "predictor": 3_937_920, "joint": 1_395_585}


def preset(name: str, vocab_size: int = VOCAB) -> dict:
    config = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))
    config.pop("_target_")
    config["vocab_size"] = vocab_size
    return config


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_nemo_sized_preset_is_nemos_streaming_fastconformer():
    config = preset("fastconformer_streaming")
    assert (config["d_model"], config["num_layers"], config["num_heads"], config["conv_kernel_size"]) == (512, 17, 8, 9)
    assert config["att_context_size"] == [[70, 13], [70, 6], [70, 1], [70, 0]]
    with torch.device("meta"):
        model = build_transducer(**config)
    assert {name: count(getattr(model, name)) for name in NEMO_PARAMETERS} == NEMO_PARAMETERS
    assert count(model) == 114_226_689
    setup = model.encoder.streaming_setup()  # the default: [70, 13], NeMo's 1.04 s lookahead
    assert (setup.first_chunk_frames, setup.chunk_frames, setup.valid_out_len) == (105, 112, 14)


@pytest.mark.slow
@pytest.mark.nemo
def test_parameter_count_equals_nemos_modules_at_the_same_sizes():
    pytest.importorskip("nemo.collections.asr")
    assert nemo_parameter_counts(preset("fastconformer_streaming"), VOCAB) == NEMO_PARAMETERS


def test_tiny_streaming_preset_streams_every_lookahead_exactly():
    torch.manual_seed(0)
    model = build_transducer(**preset("tiny_streaming", vocab_size=48)).eval()
    features, lengths = torch.randn(2, 180, 80), torch.tensor([180, 77])
    with torch.no_grad():
        for context in model.encoder.att_context_sizes:
            whole, whole_lengths = model.encode(features, lengths, context)
            setup = model.encoder.streaming_setup(context)
            streamed, streamed_lengths = encode_in_chunks(model.encoder, features, lengths, setup)
            assert streamed_lengths.tolist() == whole_lengths.tolist()
            for row, length in enumerate(whole_lengths.tolist()):
                torch.testing.assert_close(streamed[row, :length], whole[row, :length], atol=1e-5, rtol=0)
