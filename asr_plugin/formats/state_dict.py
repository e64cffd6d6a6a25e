"""Plain state dicts (a mapping of tensors, with or without the ``model.`` prefix, or under ``"model"``): weights
to fine-tune from, with no architecture, tokenizer or front end; and `extract_model_state`, the Transducer's
weights of a loaded checkpoint of either kind."""

from __future__ import annotations

from pathlib import Path

import torch

from asr_plugin.declared_shapes import check_finite
from asr_plugin.formats.base import ModelFormat, Weights
from asr_plugin.formats.torch_file import load_torch_file, peek_torch_file

MODEL_PREFIX = "model."  # TransducerModule keeps the Transducer under `self.model`
STATE_DICT_FORMATS = ("auto", "lightning", "state_dict")


def is_state_dict(obj: object) -> bool:
    """Whether `obj` is a non-empty dict of tensors."""
    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, torch.Tensor) for v in obj.values())


def extract_model_state(obj: object, source: str, fmt: str = "auto") -> dict[str, torch.Tensor]:
    """Transducer weights from a loaded checkpoint object, keys relative to the ``Transducer``.

    Accepted: a Lightning checkpoint (``{"state_dict": {"model.encoder...": ...}, ...}``; keys outside
    ``model.`` such as loss or metric state are dropped), ``{"model": state_dict}``, or a plain state
    dict with or without the ``model.`` prefix.

    Args:
        obj: what ``torch.load`` returned.
        source: the file name, for error messages.
        fmt: "auto", "lightning" (require ``state_dict``) or "state_dict" (require a plain mapping).
    """
    if fmt not in STATE_DICT_FORMATS:
        raise ValueError(f"format={fmt!r}; choose one of {STATE_DICT_FORMATS}")
    is_lightning = isinstance(obj, dict) and is_state_dict(obj.get("state_dict"))
    if fmt == "lightning" and not is_lightning:
        raise ValueError(f"{source}: format=lightning but the file has no 'state_dict' of tensors")
    if is_lightning and fmt != "state_dict":
        state = obj["state_dict"]
        return {k[len(MODEL_PREFIX) :]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}
    if isinstance(obj, dict) and is_state_dict(obj.get("model")):
        obj = obj["model"]
    if not is_state_dict(obj):
        keys = sorted(obj)[:8] if isinstance(obj, dict) else type(obj).__name__
        raise ValueError(f"{source}: neither a Lightning checkpoint nor a state dict of tensors (top level: {keys})")
    if all(k.startswith(MODEL_PREFIX) for k in obj):
        return {k[len(MODEL_PREFIX) :]: v for k, v in obj.items()}
    return dict(obj)


class StateDictFormat(ModelFormat):
    """A torch file holding a plain state dict (`extract_model_state`'s forms other than a Lightning checkpoint)."""

    name = "state_dict"
    description = "a plain state dict"

    def claims(self, path: Path) -> bool:
        obj = peek_torch_file(path) if path.is_file() else None
        if not isinstance(obj, dict) or is_state_dict(obj.get("state_dict")):
            return False
        return is_state_dict(obj) or is_state_dict(obj.get("model"))

    def read_weights(self, path: Path, blank_id: int | None = None) -> Weights:
        state = extract_model_state(load_torch_file(path), str(path), self.name)
        check_finite(state, str(path))
        return Weights(state)
