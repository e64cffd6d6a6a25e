"""Checkpoints declaring sizes their weights do not hold (they load under ``weights_only`` and name the allowed
builder): every entry point refuses them by file and key before building the model, under a memory limit so a
regression fails the test; NaN weights and interpolation-like record strings are refused by name."""

from __future__ import annotations

import pytest
import torch
from memory_limit import refusals

from asr_plugin.formats.checkpoint import CheckpointInfo, load_model, model_node
from asr_plugin.models import build_transducer

SMALL = dict(
    vocab_size=8,
    input_dim=8,
    d_model=8,
    num_layers=1,
    num_heads=2,
    ffn_dim=16,
    conv_kernel_size=3,
    predictor_embed_dim=8,
    predictor_dim=8,
    joint_dim=8,
)
RECORDS = {"tokenizer": {}, "frontend": {}}  # present (export checks that), never read before the model is built


def write_checkpoint(path, declared: dict, state: dict | None = None, records: dict = RECORDS):
    weights = build_transducer(**SMALL).state_dict() if state is None else state
    torch.save(
        {
            "hyper_parameters": {"model": model_node(declared)},
            "state_dict": {f"model.{key}": value for key, value in weights.items()},
            "asr_plugin": records,
        },
        path,
    )
    return path


@pytest.mark.slow  # a child Python under a memory limit
def test_huge_declared_sizes_are_refused_by_eval_transcribe_and_export_under_a_memory_limit(tmp_path):
    path = write_checkpoint(tmp_path / "bomb.ckpt", {**SMALL, "d_model": 8192, "num_layers": 200, "ffn_dim": 32768})
    messages = refusals(
        "from asr_plugin.formats.checkpoint import load_model; from asr_plugin.formats import export_nemo",
        [f"load_model([{str(path)!r}])", f"export_nemo({str(path)!r}, {str(tmp_path / 'bomb.nemo')!r})"],
    )
    for message in messages:
        assert message.startswith(f"{path}: hyper_parameters.model: weight ")
        assert "d_model=8192" in message and "num_layers=200" in message and "implies (" in message


@pytest.mark.parametrize(
    "key, value", [("num_layers", 200000), ("predictor_dim", 200000), ("d_model", -4), ("num_heads", "4")]
)
def test_out_of_bound_sizes_name_their_key(tmp_path, key, value):
    path = write_checkpoint(tmp_path / "bound.ckpt", {**SMALL, key: value})
    with pytest.raises(ValueError, match=rf"bound\.ckpt: hyper_parameters\.model: {key}={value!r} is "):
        load_model([path])


def test_a_wrong_shaped_weight_names_the_key_and_both_shapes(tmp_path):
    state = build_transducer(**SMALL).state_dict()
    state["joint.output.weight"] = torch.zeros(9, 8)
    path = write_checkpoint(tmp_path / "shape.ckpt", SMALL, state)
    with pytest.raises(
        ValueError,
        match=r"weight joint\.output\.weight has shape \(9, 8\) but the declared "
        r"architecture \(vocab_size=8, .*\) implies \(8, 8\)",
    ):
        load_model([path])


def test_nan_weights_are_refused_by_name(tmp_path):
    state = build_transducer(**SMALL).state_dict()
    state["predictor.embedding.weight"][3, 1] = float("nan")
    path = write_checkpoint(tmp_path / "nan.ckpt", SMALL, state)
    with pytest.raises(
        ValueError,
        match=r"nan\.ckpt: hyper_parameters\.model: weight predictor\.embedding\.weight "
        r"holds 1 NaN or infinite value\(s\) of 64",
    ):
        load_model([path])


def test_an_interpolation_in_a_record_is_refused_by_key(tmp_path):
    records = {"tokenizer": {}, "frontend": {"kind": "fbank", "options": {"dither": "${oc.env:HOME}"}}}
    path = write_checkpoint(tmp_path / "records.ckpt", SMALL, records=records)
    with pytest.raises(
        ValueError,
        match=r"records\.ckpt: asr_plugin\.frontend\.options\.dither='\$\{oc\.env:HOME\}' "
        r"looks like an interpolation",
    ):
        CheckpointInfo.of(torch.load(path, weights_only=True), path)
