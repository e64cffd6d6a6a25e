"""Resuming compares the whole model config with the checkpoint's, also where the weights fit: another attention
context (``model.att_context_size``) changes no weight's shape, and a resumed run would go on training, and record,
contexts its checkpoint was only partly trained with."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tiny_models import TINY_SIZES, tiny_transducer

from asr_plugin.formats.checkpoint import model_node, with_model_lattice
from asr_plugin.training.resume_checks import check_resumable


def _node(**overrides) -> dict:
    return with_model_lattice(model_node({"vocab_size": 7, **TINY_SIZES, **overrides}))[0]


def test_another_attention_context_is_refused_by_name_though_the_weights_fit():
    state = {f"model.{key}": value for key, value in tiny_transducer().state_dict().items()}
    module = SimpleNamespace(
        records={}, hparams={"model": _node(att_context_size=[[16, 2], [16, 0]])}, state_dict=lambda: state
    )
    check_resumable(
        module, {"hyper_parameters": {"model": _node(att_context_size=[[16, 2], [16, 0]])}, "state_dict": state}
    )
    with pytest.raises(
        ValueError,
        match=r"another model config \(model\.att_context_size: \[\[16, 2\], \[16, 0\]\] here, \[\[16, 2\]\] in "
        r"the checkpoint\).*\+finetune=from_checkpoint",
    ):
        check_resumable(module, {"hyper_parameters": {"model": _node(att_context_size=[[16, 2]])}, "state_dict": state})
