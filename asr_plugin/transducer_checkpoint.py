"""What a training checkpoint (a ``TransducerModule``'s Lightning ``.ckpt``) holds, and reading it without
running anything from it.

A checkpoint carries everything needed to reload, decode, evaluate, export and resume its model:

- ``hyper_parameters.max_symbols_per_frame``: the greedy decoding its validation used, and eval, transcription
  and export decode with (`CheckpointInfo.decoding`) unless told otherwise;
- ``hyper_parameters.model``: the architecture as plain ``asr_plugin.models.build_transducer`` keyword
  arguments (``_target_: asr_plugin.models.build_transducer``), its lattice as a record
  (``model.lattice``: ``asr_plugin.losses.lattice_from_record``); a run built from a ``.nemo`` stores the
  architecture it read there, so the ``.nemo`` is never read again. Checkpoints written before the model owned
  its lattice (TDT ``durations`` in the model node; ``clamp``, ``durations``, ``sigma`` in the loss node) are
  read in today's layout (`with_model_lattice`);
- ``state_dict``: weights, the Transducer's under ``model.``;
- ``asr_plugin``: the run's records: ``tokenizer`` (``Tokenizer.record()``: the SentencePiece model's bytes,
  sha256, size, blank id, convention, normalisation), ``frontend`` (the complete front-end spec, global
  statistics included) and the fine-tuning state (``pretrained``, ``frozen`` parameter names).

Every ``torch.load`` is ``weights_only=True``; the model node is built with :data:`MODEL_TARGETS` only, and by
every entry point that reads a checkpoint (evaluation, transcription, export, resuming a fine-tuned run) only
after `check_model_node` found its declared sizes in the stored weights.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from asr_plugin.config_nodes import TARGET, AllowList
from asr_plugin.data.frontend import complete_frontend_spec
from asr_plugin.data.tokenizer import Tokenizer
from asr_plugin.declared_shapes import check_declared_shapes, check_finite
from asr_plugin.models import Transducer, build_transducer
from asr_plugin.plain_data import refuse_interpolations

BUILD_TRANSDUCER = "asr_plugin.models.build_transducer"
# The one model builder a checkpoint may name.
MODEL_TARGETS = AllowList({BUILD_TRANSDUCER: build_transducer})
# The checkpoint key of the project's records (Lightning's own keys stay as they are).
RECORDS_KEY = "asr_plugin"


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


def build_model(node: Mapping[str, Any], key: str = "hyper_parameters.model") -> Transducer:
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
    with `state`'s, whose data is not read (`asr_plugin.declared_shapes`); NaN or infinite weights are refused
    by name."""
    MODEL_TARGETS.resolve(node.get(TARGET), source)  # a foreign target is refused as such, before any build
    check_declared_shapes(lambda: build_model(node, source), node, state, source)
    check_finite(state, source)


def model_node(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The node a checkpoint stores for ``build_transducer(**arguments)``."""
    return {TARGET: BUILD_TRANSDUCER, **{k: v for k, v in arguments.items() if k != TARGET}}


def peek_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint `path` with its tensors memory-mapped, not read (``weights_only=True``): cheap for a
    multi-GB file. ValueError naming the file when it is missing, empty, truncated or not a torch checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path}: no such file")
    if path.stat().st_size == 0:
        raise ValueError(f"checkpoint {path}: empty file (0 bytes)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # UnpicklingError, RuntimeError (zip), EOFError, ValueError
        first_line = (str(err).splitlines() or [""])[0][:200]
        raise ValueError(
            f"checkpoint {path}: not a readable torch checkpoint ({type(err).__name__}: {first_line})"
        ) from None
    if not isinstance(obj, dict):
        raise ValueError(f"checkpoint {path}: not a training checkpoint (a {type(obj).__name__}, not a dict)")
    return obj


def checkpoint_records(checkpoint: Mapping[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    """The project's records of a loaded checkpoint ({} for checkpoints written before they existed). They are
    data: a string in them that looks like an OmegaConf interpolation is refused by key (a record may reach a
    Hydra config, which would resolve it)."""
    records = checkpoint.get(RECORDS_KEY, {})
    records = dict(records) if isinstance(records, Mapping) else {}
    refuse_interpolations(records, RECORDS_KEY, source)
    return records


@dataclass
class CheckpointInfo:
    """What a training checkpoint says besides its weights: its config nodes and its records."""

    path: Path
    hyper_parameters: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, checkpoint: Mapping[str, Any], path: str | os.PathLike) -> CheckpointInfo:
        hparams = checkpoint.get("hyper_parameters", {})
        hparams = current_hyper_parameters(hparams) if isinstance(hparams, Mapping) else {}
        return cls(Path(path), hparams, checkpoint_records(checkpoint, str(path)))

    @property
    def has_data_records(self) -> bool:
        """Whether it records its tokenizer and front end (checkpoints of earlier versions do not)."""
        return "tokenizer" in self.records and "frontend" in self.records

    def _record(self, name: str) -> Mapping[str, Any]:
        if not self.has_data_records:
            raise ValueError(
                f"{self.path}: no tokenizer and front-end record (a checkpoint written before "
                "checkpoints carried them): decode it with eval.py and the data config it was trained "
                "with, or train (or resume and save) it again with this version"
            )
        return self.records[name]

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the model was trained with, rebuilt from the record's model bytes (hash checked)."""
        try:
            return Tokenizer.from_record(self._record("tokenizer"))
        except ValueError as err:
            raise ValueError(f"{self.path}: {err}") from None

    def frontend_spec(self) -> dict[str, Any]:
        """The complete front-end spec of the model's features (``asr_plugin.data.build_frontend`` builds it)."""
        try:
            return complete_frontend_spec(self._record("frontend"))
        except ValueError as err:
            raise ValueError(f"{self.path}: {err}") from None

    @property
    def decoding(self) -> dict[str, Any]:
        """The decoding settings its validation used, which decoding it elsewhere defaults to:
        ``max_symbols_per_frame`` (``hyper_parameters``; 4, the training module's default, for checkpoints
        without it). A TDT model's durations are part of its architecture (``hyper_parameters.model``)."""
        return {"max_symbols_per_frame": int(self.hyper_parameters.get("max_symbols_per_frame") or 4)}

    @property
    def feature_dim(self) -> int:
        """F, the model's input feature size (``hyper_parameters.model.input_dim``, else build_transducer's default)."""
        node = self.hyper_parameters.get("model", {})
        return int(node.get("input_dim", inspect.signature(build_transducer).parameters["input_dim"].default))
