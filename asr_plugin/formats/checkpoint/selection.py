"""Choosing the checkpoints of a run to average, and averaging their weights."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence
from pathlib import Path

import torch

from asr_plugin.formats.torch_file import load_torch_file

_NUMBER = {"epoch": re.compile(r"epoch[=_-]?(\d+)"), "step": re.compile(r"step[=_-]?(\d+)")}


def checkpoint_order(path: Path) -> tuple[int, int, float]:
    """Sort key: (epoch, step) from the file name ("epoch=3-step=900.ckpt", "epoch003-wer0.1.ckpt"), then mtime."""
    numbers = [int(m.group(1)) if (m := pattern.search(path.name)) else -1 for pattern in _NUMBER.values()]
    return numbers[0], numbers[1], path.stat().st_mtime


def select_checkpoints(path: str | os.PathLike, avg: int = 1) -> list[Path]:
    """The checkpoints to average, oldest first.

    Args:
        path: a checkpoint file, or a directory of ``*.ckpt`` files.
        avg: how many. For a directory: with 1, its best checkpoint by the metric its checkpoint callback
            recorded (`recorded_score`; the newest when none records one); else its last `avg` checkpoints by
            `checkpoint_order`; both leave out ``last*.ckpt`` (a copy of one of them) unless nothing else is
            there. For a file: the file and the `avg - 1` checkpoints that precede it in its directory.
    """
    path = Path(path)
    if avg < 1:
        raise ValueError(f"avg={avg} must be >= 1")
    if path.is_file():
        if avg == 1:
            return [path]
        candidates = sorted(
            (p for p in _checkpoints_in(path.parent) if not p.name.startswith("last")), key=checkpoint_order
        )
        candidates = [p for p in candidates if checkpoint_order(p) <= checkpoint_order(path) and p != path] + [path]
    elif path.is_dir():
        every = sorted(_checkpoints_in(path), key=checkpoint_order)
        candidates = [p for p in every if not p.name.startswith("last")] or every
        if avg == 1 and (best := best_recorded(candidates)) is not None:
            return [best]
    else:
        where = "" if path.is_absolute() else f" (relative to the current directory {Path.cwd()})"
        raise FileNotFoundError(f"checkpoint {path} does not exist{where}")
    if len(candidates) < avg:
        raise ValueError(
            f"avg={avg} but only {len(candidates)} checkpoint(s) available at {path}: {[p.name for p in candidates]}"
        )
    return candidates[-avg:]


def recorded_score(path: Path) -> tuple[float, str] | None:
    """(score, "min" or "max") that the checkpoint callback monitoring a metric recorded for the checkpoint `path`
    when it saved it (Lightning's ``ModelCheckpoint`` state: ``current_score``, its mode in the state's key); None
    when no such callback recorded one."""
    checkpoint = load_torch_file(path, "cpu", True)  # memory-mapped: only its callbacks' states are read here
    callbacks = (checkpoint.get("callbacks") if isinstance(checkpoint, dict) else None) or {}
    for key, state in callbacks.items():
        if not (isinstance(key, str) and key.startswith("ModelCheckpoint{") and isinstance(state, dict)):
            continue
        score = state.get("current_score")
        if state.get("monitor") is None or score is None:
            continue
        settings = ast.literal_eval(key.removeprefix("ModelCheckpoint"))  # a dict's repr, read as data only
        return float(score), settings.get("mode", "min")
    return None


def best_recorded(paths: Sequence[Path]) -> Path | None:
    """The checkpoint of `paths` with the best `recorded_score` (the newer of equal ones: `paths` oldest first);
    None when none records a score."""
    scored = [(score, path) for path in paths if (score := recorded_score(path)) is not None]
    if not scored:
        return None
    sign = {"min": 1.0, "max": -1.0}
    return min(reversed(scored), key=lambda item: sign.get(item[0][1], 1.0) * item[0][0])[1]


def _checkpoints_in(directory: Path) -> list[Path]:
    """The ``*.ckpt`` files of a directory, without hidden ones (partial writes of a killed run)."""
    return [p for p in directory.glob("*.ckpt") if not p.name.startswith(".")]


def average_state_dicts(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of floating tensors (accumulated in float64); other tensors (e.g. batch-norm
    ``num_batches_tracked``) are taken from the last state. All states must have the same keys and shapes."""
    if not states:
        raise ValueError("average_state_dicts: no state dict given")
    keys = set(states[-1])
    for index, state in enumerate(states):
        if set(state) != keys:
            raise ValueError(f"state dict {index} has different keys: {sorted(set(state) ^ keys)[:5]}")
    averaged = {}
    for key, last in states[-1].items():
        if not last.is_floating_point():
            averaged[key] = last.clone()
            continue
        total = torch.zeros_like(last, dtype=torch.float64)
        for index, state in enumerate(states):
            if state[key].shape != last.shape:
                raise ValueError(
                    f"{key}: shape {tuple(state[key].shape)} in state dict {index}, {tuple(last.shape)} in the last"
                )
            total += state[key].double()
        averaged[key] = (total / len(states)).to(last.dtype)
    return averaged
