"""Training checkpoint files: read only after their content hash and their weights' finiteness are checked, and
written complete or not at all.

`read_checkpoint` is every read of a training checkpoint (evaluation, transcription, the exports, fine-tuning,
``ckpt_path``, ``TransducerModule.load_from_checkpoint`` and Lightning's own resuming and testing through
``asr_plugin.training.checkpoint_io``), so a damaged or diverged checkpoint is refused by name wherever it is
given, and ``ckpt_path=last`` passes over it. `write_checkpoint` writes a temporary file next to the target,
fsyncs and renames it (a kill or a full disk keeps the previous checkpoint), with the content hash
(`asr_plugin.formats.checkpoint.content_hash`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from asr_plugin.declared_shapes import check_finite
from asr_plugin.files import write_atomic
from asr_plugin.formats.checkpoint.content_hash import verify_content_hash, with_content_hash
from asr_plugin.formats.checkpoint.model_node import MODEL_NODE
from asr_plugin.formats.state_dict import MODEL_PREFIX
from asr_plugin.formats.torch_file import load_torch_file


def check_finite_weights(checkpoint: Mapping[str, Any], path: str | os.PathLike) -> None:
    """ValueError naming `path` and the first NaN or infinite weight of the checkpoint's ``state_dict``: the
    model's first (relative to it, as its model node's errors name them), then the rest (an auxiliary CTC head)."""
    state = checkpoint.get("state_dict")
    if not isinstance(state, Mapping):
        return
    tensors = {key: value for key, value in state.items() if isinstance(value, torch.Tensor)}
    model = {key[len(MODEL_PREFIX) :]: value for key, value in tensors.items() if key.startswith(MODEL_PREFIX)}
    check_finite(model, f"{path}: {MODEL_NODE}")
    check_finite(
        {key: value for key, value in tensors.items() if not key.startswith(MODEL_PREFIX)}, f"{path}: state_dict"
    )


def check_finite_optimizer_state(checkpoint: Mapping[str, Any], path: str | os.PathLike) -> None:
    """ValueError naming `path` and the first NaN or infinite tensor of the checkpoint's optimizer states (finite
    weights beside a NaN moment: the resumed run's first step would make every weight NaN). Checked where a
    resume reads the file (`asr_plugin.formats.read_resumable_checkpoint`), not by decoding, which needs none."""
    tensors = {
        f"optimizer_states[{index}].state[{param}].{name}": value
        for index, optimizer in enumerate(checkpoint.get("optimizer_states") or ())
        if isinstance(optimizer, Mapping)
        for param, moments in (optimizer.get("state") or {}).items()
        if isinstance(moments, Mapping)
        for name, value in moments.items()
        if isinstance(value, torch.Tensor)
    }
    try:
        check_finite(tensors, f"checkpoint {path}", "optimizer tensor")
    except ValueError as err:
        raise ValueError(
            f"{err}: it cannot be resumed (its weights are finite: it can be evaluated, or a new run fine-tuned "
            "from it with +finetune=from_checkpoint)"
        ) from None


def read_checkpoint(path: str | os.PathLike, map_location: Any = "cpu", mmap: bool = True) -> dict[str, Any]:
    """The training checkpoint `path` (``weights_only=True``; `mmap`: tensors memory-mapped), after its content
    hash and the finiteness of its weights are checked. ValueError naming the file when it is missing, empty,
    truncated, not a checkpoint, damaged since it was written, or holds NaN or infinite weights."""
    checkpoint = load_torch_file(path, map_location, mmap)
    if not isinstance(checkpoint, dict):
        raise ValueError(f"checkpoint {path}: not a training checkpoint (a {type(checkpoint).__name__}, not a dict)")
    verify_content_hash(checkpoint, f"checkpoint {path}")
    check_finite_weights(checkpoint, path)
    return checkpoint


def write_checkpoint(checkpoint: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Writes `checkpoint` with its content hash to a temporary file next to `path`, then renames it onto `path`.
    On any failure the partial file is removed and a previous `path` stays: OSError saying so, with the space
    left on its file system."""
    path = Path(path)
    try:
        return write_atomic(path, lambda tmp: torch.save(with_content_hash(checkpoint), tmp))
    except (OSError, RuntimeError) as err:  # torch's writer reports a full disk as a RuntimeError
        free = shutil.disk_usage(path.parent).free / 2**20 if path.parent.is_dir() else float("nan")
        raise OSError(
            f"writing checkpoint {path} failed ({err}); any previous {path.name} is kept. "
            f"{free:.0f} MiB are free on its file system"
        ) from err
