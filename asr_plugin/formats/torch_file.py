"""Reading a torch file (a training checkpoint, a state dict) without running anything from it."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch


def load_torch_file(path: str | os.PathLike, map_location: Any = "cpu", mmap: bool = True) -> object:
    """What ``torch.load(path, weights_only=True)`` returns (no code from the file runs; the file is only read).
    With `mmap` (a file in torch's zip layout) the tensors are memory-mapped, not read: cheap for a multi-GB file.

    Raises ValueError naming the file when it is missing, empty, truncated or not a torch file.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path}: no such file")
    if path.stat().st_size == 0:
        raise ValueError(f"checkpoint {path}: empty file (0 bytes)")
    try:  # files of torch's legacy (pre-1.6) layout cannot be memory-mapped
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap and zipfile.is_zipfile(path))
    except Exception as err:  # UnpicklingError, RuntimeError (zip), EOFError, ValueError
        first_line = (str(err).splitlines() or [""])[0][:200]
        why = (
            "; it holds objects other than tensors and plain data, and files are read with weights_only=True "
            "(nothing in them runs)"
            if isinstance(err, pickle.UnpicklingError) and "weights_only" in str(err)  # torch's refusal, not garbage
            else ""
        )
        raise ValueError(
            f"checkpoint {path}: not a readable torch checkpoint ({type(err).__name__}: {first_line}){why}"
        ) from None


def peek_torch_file(path: Path) -> object | None:
    """`load_torch_file` memory-mapped, or None for anything it cannot read (for `ModelFormat.claims`)."""
    try:
        return load_torch_file(path)
    except ValueError:
        return None
