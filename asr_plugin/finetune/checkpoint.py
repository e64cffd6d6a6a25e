"""Reading model weights from a Lightning checkpoint or a plain state dict (format auto-detected)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

MODEL_PREFIX = "model."  # TransducerModule keeps the Transducer under `self.model`
STATE_DICT_FORMATS = ("auto", "lightning", "state_dict")


def _is_state_dict(obj: object) -> bool:
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
    is_lightning = isinstance(obj, dict) and _is_state_dict(obj.get("state_dict"))
    if fmt == "lightning" and not is_lightning:
        raise ValueError(f"{source}: format=lightning but the file has no 'state_dict' of tensors")
    if is_lightning and fmt != "state_dict":
        state = obj["state_dict"]
        return {k[len(MODEL_PREFIX) :]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}
    if isinstance(obj, dict) and _is_state_dict(obj.get("model")):
        obj = obj["model"]
    if not _is_state_dict(obj):
        keys = sorted(obj)[:8] if isinstance(obj, dict) else type(obj).__name__
        raise ValueError(f"{source}: neither a Lightning checkpoint nor a state dict of tensors (top level: {keys})")
    if all(k.startswith(MODEL_PREFIX) for k in obj):
        return {k[len(MODEL_PREFIX) :]: v for k, v in obj.items()}
    return dict(obj)


def load_checkpoint_file(path: str | os.PathLike) -> object:
    """``torch.load`` on CPU with ``weights_only=True`` (no code from the file runs); never writes the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError or EOFError for bad files
        raise ValueError(f"{path}: cannot be read as a torch checkpoint ({err})") from err


def read_model_state(path: str | os.PathLike, fmt: str = "auto") -> dict[str, torch.Tensor]:
    """Transducer weights of the checkpoint file `path` (see `extract_model_state`)."""
    return extract_model_state(load_checkpoint_file(path), str(path), fmt)
