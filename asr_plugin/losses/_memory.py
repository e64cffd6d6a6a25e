"""Memory budget of the sample-wise loss: parsing, the per-lattice-cell estimate and the group plan.

Transient memory of one step (a group of n samples padded to T_g x (U_g+1), or one T-chunk of a sample)
is estimated as ``n * T_g * (U_g+1) * cell_bytes`` with

    cell_bytes = V * logits_bytes          # logits; their gradient overwrites them in place
               + 4 * H * input_bytes       # joint hidden activation, its saved copy and two backward temporaries
               + 24                        # log-probs (2), denominator, alpha, beta (float32) + slack

where H is the joint's hidden size (``joint.joint_dim`` / ``joint.hidden_dim`` when the joint exposes it,
else max(H_e, H_p)) and ``logits_bytes`` is the element size the joint actually returns (autocast aware).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

DEFAULT_CPU_BUDGET = 256 * 2**20
CUDA_FREE_FRACTION = 0.5  # of torch.cuda.mem_get_info() free memory, leaving room for the allocator's slack

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_memory_budget(value: int | str | None, name: str = "memory_budget") -> int | None:
    """None, a number of bytes, or a string such as "512MiB" / "2GB" / "1.5GiB" -> bytes (or None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{name} must be a number of bytes or a string like '512MiB', got {value!r}")
    if isinstance(value, str):
        match = _PATTERN.match(value)
        unit = match.group(2).lower() if match else None
        if unit not in _UNITS:
            raise ValueError(f"{name}: cannot parse {value!r}; use bytes or a string like '512MiB' or '2GB'")
        value = float(match.group(1)) * _UNITS[unit]
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return int(value)


def default_budget(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * CUDA_FREE_FRACTION)
    return DEFAULT_CPU_BUDGET


def joint_hidden_size(joint, encoder_dim: int, predictor_dim: int) -> int:
    for attribute in ("joint_dim", "hidden_dim"):
        size = getattr(joint, attribute, None)
        if isinstance(size, int) and size > 0:
            return size
    return max(encoder_dim, predictor_dim)


def cell_bytes(vocab: int, logits_dtype: torch.dtype, hidden: int, input_dtype: torch.dtype) -> int:
    return vocab * logits_dtype.itemsize + 4 * hidden * input_dtype.itemsize + 24


@dataclass(frozen=True)
class Group:
    """Samples processed in one step, padded to `frames` x `labels_plus_one`, in T-chunks of `chunk` frames."""

    samples: tuple[int, ...]
    frames: int
    labels_plus_one: int
    chunk: int

    def chunks(self) -> list[tuple[int, int]]:
        return [(t0, min(t0 + self.chunk, self.frames)) for t0 in range(0, self.frames, self.chunk)]


def plan_groups(frames: tuple[int, ...], labels: tuple[int, ...], budget: int, bytes_per_cell: int) -> list[Group]:
    """Greedy grouping of samples sorted by lattice size (largest first) while the padded group fits the budget.

    A sample whose lattice alone exceeds the budget forms its own group, processed in T-chunks that fit.
    """
    order = sorted(range(len(frames)), key=lambda b: frames[b] * (labels[b] + 1), reverse=True)
    groups: list[Group] = []
    members: list[int] = []
    group_frames = group_labels = 0

    def close() -> None:
        cells_per_frame = group_labels * bytes_per_cell * len(members)
        fits = group_frames * cells_per_frame <= budget
        chunk = group_frames if fits else max(1, budget // cells_per_frame)
        groups.append(Group(tuple(members), group_frames, group_labels, chunk))

    for b in order:
        next_frames, next_labels = max(group_frames, frames[b]), max(group_labels, labels[b] + 1)
        if members and (len(members) + 1) * next_frames * next_labels * bytes_per_cell > budget:
            close()
            members, next_frames, next_labels = [], frames[b], labels[b] + 1
        members.append(b)
        group_frames, group_labels = next_frames, next_labels
    close()
    return groups
