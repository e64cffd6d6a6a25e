"""A training checkpoint's model node (``hyper_parameters.model``): plain ``build_transducer`` keyword arguments,
built with the project's allow-list only (`MODEL_TARGETS`), after `check_model_node` found the sizes it declares
in the stored weights. Nodes of checkpoints written before the model owned its lattice are read in today's
layout (`with_model_lattice`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from asr_plugin.config_nodes import TARGET, AllowList
from asr_plugin.declared_shapes import check_declared_shapes
from asr_plugin.models import Transducer, build_transducer

BUILD_TRANSDUCER = "asr_plugin.models.build_transducer"
# The one model builder a checkpoint may name.
MODEL_TARGETS = AllowList({BUILD_TRANSDUCER: build_transducer})
# Where the model node stands in a checkpoint; errors about the model's declared sizes and weights name it.
MODEL_NODE = "hyper_parameters.model"


# What a loss node held before the model owned its lattice (now model.lattice's parameters).
LEGACY_LOSS_LATTICE_KEYS = ("clamp", "durations", "sigma")


def with_model_lattice(model: Mapping[str, Any], loss: Mapping[str, Any] | None = None) -> tuple[dict, dict]:
    """A checkpoint's (model node, loss node) in today's layout: a checkpoint written before the model owned its
    lattice has the TDT ``durations`` in its model node and ``clamp``, ``durations``, ``sigma`` in its loss node;
    they become ``model.lattice`` (a record) and leave the loss node. Nodes that have ``model.lattice`` are
    returned as they are. ValueError when the two nodes name different durations (a run that trained one
    lattice and decoded another cannot be converted: train it again)."""
    model, loss = dict(model), dict(loss or {})
    if "lattice" in model:
        return model, loss
    legacy = {key: loss.pop(key) for key in LEGACY_LOSS_LATTICE_KEYS if key in loss}
    model_durations, loss_durations = model.pop("durations", None), legacy.get("durations")
    if model_durations and loss_durations and list(model_durations) != list(loss_durations):
        raise ValueError(
            f"the checkpoint's model.durations {list(model_durations)} and loss.durations "
            f"{list(loss_durations)} differ: it trained one lattice and decodes another and cannot be "
            "converted; train it again"
        )
    durations, clamp = model_durations or loss_durations, legacy.get("clamp")
    if durations:
        model["lattice"] = {
            "kind": "tdt",
            "durations": list(durations),
            "sigma": float(legacy.get("sigma") or 0.0),
            "clamp": clamp,
        }
    else:
        model["lattice"] = {"kind": "rnnt", "clamp": clamp, "fastemit_lambda": 0.0}
    return model, loss


def current_hyper_parameters(hyper_parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``hyper_parameters`` with its model and loss nodes in today's layout (`with_model_lattice`)."""
    hyper = dict(hyper_parameters)
    if isinstance(hyper.get("model"), Mapping):
        hyper["model"], loss = with_model_lattice(hyper["model"], hyper.get("loss"))
        if isinstance(hyper.get("loss"), Mapping):
            hyper["loss"] = loss
    return hyper


def build_model(node: Mapping[str, Any], key: str = MODEL_NODE) -> Transducer:
    """The Transducer of a checkpoint's model node (plain ``build_transducer`` arguments; one written before the
    model owned its lattice is read as `with_model_lattice` converts it); any other target is refused naming
    `key`."""
    return MODEL_TARGETS.build(with_model_lattice(node)[0], key)


def build_checked_model(node: Mapping[str, Any], state: Mapping[str, torch.Tensor], source: str) -> Transducer:
    """`build_model` of a file's model node, after `check_model_node`: a node declaring sizes its weights do
    not hold is refused (naming `source`, the key and both values) before anything of that size is allocated.
    `state`: the Transducer's weights (keys relative to it), memory-mapped or loaded."""
    check_model_node(node, state, source)
    return build_model(node, source)


def check_model_node(node: Mapping[str, Any], state: Mapping[str, torch.Tensor], source: str) -> None:
    """Bounds the model node's sizes and compares the parameter shapes they imply (built on the meta device)
    with `state`'s, whose data is not read (`asr_plugin.declared_shapes`). (NaN or infinite weights are refused
    where the file is read: `asr_plugin.formats.checkpoint.files.read_checkpoint`.)"""
    MODEL_TARGETS.resolve(node.get(TARGET), source)  # a foreign target is refused as such, before any build
    check_declared_shapes(lambda: build_model(node, source), node, state, source)


def model_node(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The node a checkpoint stores for ``build_transducer(**arguments)``."""
    return {TARGET: BUILD_TRANSDUCER, **{k: v for k, v in arguments.items() if k != TARGET}}
