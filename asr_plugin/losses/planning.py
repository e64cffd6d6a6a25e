"""The sample-wise loss's plan: memory budget parsing, the per-lattice-cell estimate, and the groups.

Transient memory of one step (a group of n samples padded to T_g x (U_g+1), whole or one T-chunk of Tc
frames) is estimated as ``n * Tc * (U_g+1) * step_bytes + n * T_g * (U_g+1) * lattice_bytes``: the step's
cells, and the statistics of the group's whole lattice, which stay alive across its chunks. For any joint (its
autograd graph is kept):

    step_bytes    = W * logits_bytes       # logits (W = V, or V + D for TDT); their gradient overwrites them
                  + 4 * H * input_bytes    # joint hidden activation, its saved copy and two backward temporaries
    lattice_bytes = 4 * values + 4         # the lattice's float32 statistics (RNN-T: log-probs [blank, label],
                                           # denominator, alpha, beta = 5 values; TDT: 6 + D) + slack

For a standard joint run fused (no autograd graph over the lattice, see ``runners.py``) the hidden part is
``2 * H * hidden_bytes``: the kept activation (GELU: its input) and its gradient, which the activation's
derivative overwrites in place (GELU's output for the W_out gradient is freed before the gradient exists),
plus ``H`` bytes for the kept bool dropout mask when the joint's dropout is active.
H is the joint's hidden size (``hidden_dim`` of a joint declaring ``runners.JointShape``, e.g. every
``StandardJoint``; else max(H_e, H_p)); ``logits_bytes`` is the element size the joint actually returns
(autocast aware).

The budget is fixed (not a fraction of free memory), so the plan is the same on every step and every DDP
rank for the same lengths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

DEFAULT_CUDA_BUDGET = 2**30
DEFAULT_CPU_BUDGET = 256 * 2**20

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
    return DEFAULT_CUDA_BUDGET if device.type == "cuda" else DEFAULT_CPU_BUDGET


@dataclass(frozen=True)
class CellBytes:
    """The estimate per lattice cell: `step` bytes for every cell of a step (one T-chunk, or the whole group:
    the logits and the hidden tensors), `lattice` bytes for every cell of the group's whole lattice (the
    statistics the recursions and the gradient read, alive for the whole group however it is chunked)."""

    step: int
    lattice: int = 0

    @property
    def total(self) -> int:
        """Bytes of a cell of a group computed whole."""
        return self.step + self.lattice


def cell_bytes(
    width: int,
    logits_dtype: torch.dtype,
    hidden: int,
    input_dtype: torch.dtype,
    hidden_copies: int = 4,
    mask_bytes: int = 0,
    values_per_cell: int = 5,
) -> CellBytes:
    """Step: `width` (V, or V + D for TDT) scores and the hidden tensors; lattice: the lattice's
    `values_per_cell` float32 statistics plus 4 bytes of slack (RNN-T: 5 values, 24 bytes; TDT: 6 + D)."""
    step = width * logits_dtype.itemsize + hidden * (hidden_copies * input_dtype.itemsize + mask_bytes)
    return CellBytes(step, 4 * values_per_cell + 4)


@dataclass(frozen=True)
class Group:
    """Samples processed in one step, padded to `frames` x `labels_plus_one`, in T-chunks of `chunk` frames.

    `start` is the position of the group's first sample in the plan's order (its samples are consecutive there).
    """

    start: int
    samples: tuple[int, ...]
    frames: int
    labels_plus_one: int
    chunk: int

    def chunks(self) -> list[tuple[int, int]]:
        """[t0, t1) of each step: a shorter remainder first, then full chunks. The sample-wise loss keeps the
        last chunk from its first pass and recomputes the others, so the kept one is a full chunk."""
        bounds = [0, *range(self.frames % self.chunk or self.chunk, self.frames + 1, self.chunk)]
        return list(zip(bounds[:-1], bounds[1:]))

    def cells(self) -> int:
        """Padded lattice cells of one step (one T-chunk)."""
        return len(self.samples) * self.chunk * self.labels_plus_one

    def lattice_cells(self) -> int:
        """Padded lattice cells of the whole group."""
        return len(self.samples) * self.frames * self.labels_plus_one

    def recomputed_cells(self) -> int:
        """Cells whose joint forward runs twice: every chunk but the last, which is kept from the first pass."""
        t0, _ = self.chunks()[-1]
        return len(self.samples) * t0 * self.labels_plus_one

    def step_bytes(self, bytes_per_cell: CellBytes) -> int:
        """Estimated transient memory of one step: a chunk's cells and the whole group's statistics."""
        return self.cells() * bytes_per_cell.step + self.lattice_cells() * bytes_per_cell.lattice


@dataclass(frozen=True)
class Plan:
    """The groups of one sample-wise call, in the order they run, and what the estimate counts."""

    order: tuple[int, ...]  # sample ids, group after group
    groups: tuple[Group, ...]
    bytes_per_cell: CellBytes
    fixed_bytes: int = 0  # inputs, their gradients and the parameter-gradient buffers (not part of the budget)

    @property
    def steps(self) -> int:
        """Joint calls of one gradient pass: a group's T-chunks, or the whole group."""
        return sum(len(group.chunks()) for group in self.groups)

    def step_bytes(self) -> int:
        """Estimated transient memory of the largest step."""
        return max(group.step_bytes(self.bytes_per_cell) for group in self.groups)

    def estimated_peak_bytes(self) -> int:
        """Inputs, their gradients and parameter-gradient buffers plus the largest step."""
        return self.fixed_bytes + self.step_bytes()

    def recomputed_fraction(self) -> float:
        """Share of the padded lattice cells whose joint forward runs twice (T-chunked samples)."""
        return sum(g.recomputed_cells() for g in self.groups) / sum(g.lattice_cells() for g in self.groups)

    def describe(self) -> str:
        return (
            f"sample-wise transducer loss: {len(self.order)} samples in {len(self.groups)} groups, {self.steps} steps "
            f"(T-chunks; {100 * self.recomputed_fraction():.0f} % of the lattice cells recomputed); largest step "
            f"~{self.step_bytes() / 2**20:.1f} MiB, estimated peak ~{self.estimated_peak_bytes() / 2**20:.1f} MiB "
            f"(inputs, their gradients and parameter-gradient buffers: {self.fixed_bytes / 2**20:.1f} MiB)"
        )


# Label-length bands of the 2-D sort: consecutive samples share a band of U and are sorted by T inside it.
_LABEL_BANDS = 8


def _sorted_by_labels_then_frames(frames: tuple[int, ...], labels: tuple[int, ...]) -> list[int]:
    """Sample ids in bands of U_b from the longest, by T_b (then U_b) descending inside each band."""
    width = -(-(max(labels) + 1) // _LABEL_BANDS)  # ceil
    keyed = sorted(((labels[b] // width, frames[b], labels[b], -b) for b in range(len(frames))), reverse=True)
    return [-negative_b for *_, negative_b in keyed]


def plan_groups(
    frames: tuple[int, ...],
    labels: tuple[int, ...],
    budget: int,
    bytes_per_cell: CellBytes | int,
    max_samples_per_group: int | None = None,
    fixed_bytes: int = 0,
) -> Plan:
    """Group samples so that each padded group fits `budget`, cutting padding in both T and U.

    Samples are sorted in two dimensions (bands of U_b, then T_b inside a band, longest first), so that
    neighbours are close in both, and grouped greedily while the padded group fits the budget and holds at
    most `max_samples_per_group` samples. A sample whose lattice alone exceeds the budget forms its own group,
    processed in T-chunks of as many frames as fit beside its whole lattice's statistics (at least one).
    `bytes_per_cell` as an int counts per step cell only.
    """
    cost = bytes_per_cell if isinstance(bytes_per_cell, CellBytes) else CellBytes(bytes_per_cell)
    groups: list[Group] = []
    order: list[int] = []
    members: list[int] = []
    group_frames = group_labels = 0

    def close() -> None:
        lattice_cells = len(members) * group_frames * group_labels
        fits = lattice_cells * cost.total <= budget
        step_bytes_per_frame = len(members) * group_labels * cost.step
        chunk = group_frames if fits else max(1, (budget - lattice_cells * cost.lattice) // step_bytes_per_frame)
        groups.append(Group(len(order), tuple(members), group_frames, group_labels, min(chunk, group_frames)))
        order.extend(members)

    for b in _sorted_by_labels_then_frames(frames, labels):
        next_frames, next_labels = max(group_frames, frames[b]), max(group_labels, labels[b] + 1)
        full = max_samples_per_group is not None and len(members) >= max_samples_per_group
        too_big = (len(members) + 1) * next_frames * next_labels * cost.total > budget
        if members and (full or too_big):
            close()
            members, next_frames, next_labels = [], frames[b], labels[b] + 1
        members.append(b)
        group_frames, group_labels = next_frames, next_labels
    close()
    return Plan(tuple(order), tuple(groups), cost, fixed_bytes)


def parse_max_samples(value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_samples_per_group must be None or a positive int, got {value!r}")
    return value
