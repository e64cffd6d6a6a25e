"""Training checkpoint files: read without running anything from them, and written complete or not at all.

`read_checkpoint` is every read of a training checkpoint (evaluation, transcription, the exports, fine-tuning,
``ckpt_path`` and Lightning's own resuming through ``asr_plugin.training.checkpoint_io``). `write_checkpoint`
writes a temporary file next to the target, fsyncs and renames it (a kill or a full disk keeps the previous
checkpoint).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from asr_plugin.data.atomic import write_atomic
from asr_plugin.formats.torch_file import load_torch_file


def read_checkpoint(path: str | os.PathLike, map_location: Any = "cpu", mmap: bool = True) -> dict[str, Any]:
    """The training checkpoint `path` (``weights_only=True``; `mmap`: tensors memory-mapped, not read: cheap for a
    multi-GB file). ValueError naming the file when it is missing, empty, truncated or not a checkpoint."""
    checkpoint = load_torch_file(path, map_location, mmap)
    if not isinstance(checkpoint, dict):
        raise ValueError(f"checkpoint {path}: not a training checkpoint (a {type(checkpoint).__name__}, not a dict)")
    return checkpoint


def write_checkpoint(checkpoint: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Writes `checkpoint` to a temporary file next to `path`, then renames it onto `path`.
    On any failure the partial file is removed and a previous `path` stays: OSError saying so, with the space
    left on its file system."""
    path = Path(path)
    try:
        return write_atomic(path, lambda tmp: torch.save(checkpoint, tmp))
    except (OSError, RuntimeError) as err:  # torch's writer reports a full disk as a RuntimeError
        free = shutil.disk_usage(path.parent).free / 2**20 if path.parent.is_dir() else float("nan")
        raise OSError(
            f"writing checkpoint {path} failed ({err}); any previous {path.name} is kept. "
            f"{free:.0f} MiB are free on its file system"
        ) from err
