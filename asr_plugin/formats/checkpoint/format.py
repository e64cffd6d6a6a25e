"""The project's own format: a training checkpoint (``TransducerModule``'s Lightning ``.ckpt``), or a directory of
them whose last ones are averaged."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from asr_plugin.config_nodes import TARGET
from asr_plugin.formats.base import LoadedModel, ModelFormat, Settings, Weights
from asr_plugin.formats.checkpoint.files import read_checkpoint
from asr_plugin.formats.checkpoint.model_node import MODEL_NODE, build_checked_model
from asr_plugin.formats.checkpoint.records import CheckpointInfo
from asr_plugin.formats.checkpoint.selection import average_state_dicts, select_checkpoints
from asr_plugin.formats.state_dict import extract_model_state, is_state_dict
from asr_plugin.formats.torch_file import peek_torch_file
from asr_plugin.models import Transducer

log = logging.getLogger(__name__)

CTC_PREFIX = "ctc."  # the training module's auxiliary CTC head


def auxiliary_ctc_state(checkpoint: object) -> dict[str, torch.Tensor] | None:
    """A training checkpoint's auxiliary CTC head (``state_dict`` keys ``ctc.*``, relative to the head), or None."""
    state = checkpoint.get("state_dict") if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict):
        return None
    head = {key[len(CTC_PREFIX) :]: value for key, value in state.items() if key.startswith(CTC_PREFIX)}
    return head or None


def load_model(
    paths: Sequence[str | os.PathLike], device: str | torch.device = "cpu"
) -> tuple[Transducer, CheckpointInfo]:
    """Rebuilds the Transducer of training checkpoint(s) (``hyper_parameters.model``) with their averaged weights.

    The model node is data: only ``asr_plugin.models.build_transducer`` is built from it (any other
    ``_target_``, in any of the files, is refused naming it). Checkpoints recording another tokenizer or front
    end than the last one are not averaged; a node declaring sizes the weights do not hold is refused by name
    before the model is built, and each file is read only after its content hash and its weights' finiteness
    were checked (`read_checkpoint`). Returns the model in eval mode on `device` and the last checkpoint's
    `CheckpointInfo` (config nodes, tokenizer and front-end records). Files are only read.
    """
    model, info, _ = _averaged(paths)
    return model.to(device).eval(), info


def _averaged(paths: Sequence[str | os.PathLike]) -> tuple[Transducer, CheckpointInfo, dict | None]:
    """`load_model`'s model (on the CPU) and info, and the averaged auxiliary CTC head (None unless every
    checkpoint has one)."""
    if not paths:
        raise ValueError("load_model: no checkpoint path given")
    loaded = [(path, read_checkpoint(path)) for path in paths]
    states = [extract_model_state(obj, str(path)) for path, obj in loaded]
    heads = [auxiliary_ctc_state(obj) for _, obj in loaded]
    infos = [CheckpointInfo.of(obj, path) for path, obj in loaded]
    info = infos[-1]
    for other in infos[:-1]:
        for name in ("tokenizer", "frontend"):
            if other.records.get(name) != info.records.get(name):
                raise ValueError(
                    f"avg: {other.path} and {info.path} record another {name}: checkpoints of "
                    "different runs cannot be averaged"
                )
    model_cfg = info.hyper_parameters.get("model")
    if not isinstance(model_cfg, dict) or TARGET not in model_cfg:
        raise ValueError(
            f"{info.path}: no hyper_parameters.model node to rebuild the model from (not a TransducerModule checkpoint?)"
        )
    state = average_state_dicts(states) if len(states) > 1 else states[0]
    model = build_checked_model(model_cfg, state, f"{info.path}: {MODEL_NODE}")
    model.load_state_dict(state)
    log.info("model from %s", ", ".join(str(p) for p in paths))
    head = average_state_dicts(heads) if all(head is not None for head in heads) else None
    return model, info, head


class LightningCheckpointFormat(ModelFormat):
    """A training checkpoint: architecture (``hyper_parameters.model``), weights, tokenizer and front end
    (``asr_plugin`` records), decoding and training settings; or a directory of them (the last `avg` averaged:
    `select_checkpoints`). Also the Lightning checkpoint of another module holding a ``Transducer`` under
    ``model.``, as weights to fine-tune from."""

    name = "lightning"
    description = "a training checkpoint"

    def claims(self, path: Path) -> bool:
        if path.is_dir():  # of checkpoints (`select_checkpoints` says when it holds too few)
            return True
        obj = peek_torch_file(path) if path.is_file() else None
        return isinstance(obj, dict) and is_state_dict(obj.get("state_dict"))

    def select(self, path: Path, avg: int = 1) -> list[Path]:
        return select_checkpoints(path, avg)

    def read_model(self, paths: Sequence[Path], device: str | torch.device = "cpu") -> LoadedModel:
        model, info, head = _averaged(paths)
        architecture = {key: value for key, value in info.hyper_parameters["model"].items() if key != TARGET}
        records = info.has_data_records
        return LoadedModel(
            model.to(device).eval(),
            architecture,
            info.tokenizer() if records else None,
            info.frontend_spec() if records else None,
            info.settings,
            head,
            tuple(Path(path) for path in paths),
            self.name,
            info.missing_records,
        )

    def read_weights(self, path: Path, blank_id: int | None = None) -> Weights:
        checkpoint = read_checkpoint(path)
        return Weights(extract_model_state(checkpoint, str(path), self.name), auxiliary_ctc_state(checkpoint))

    def read_settings(self, path: Path) -> Settings:
        return CheckpointInfo.of(read_checkpoint(path), path).settings
