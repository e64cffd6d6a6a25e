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

For the flash joint (``flash.FlashRunner``: no logits and no hidden activation exist outside the kernels' registers,
see ``flash_cell_bytes``) nothing per cell grows with V or H: ``step_bytes = 0``, ``lattice_bytes`` as above
(24 for RNN-T), and what grows with H is per padded *row* of the group (each of its T_g frames and U_g+1 label
positions): ``n * (T_g + U_g+1) * row_bytes``, the projections and their gradients. Since no step memory
scales with a T-chunk, a flash group is never chunked.

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
    statistics the recursions and the gradient read, alive for the whole group however it is chunked); and
    `row` bytes for every padded row of the group, each of its T_g frames and U_g+1 label positions (the flash
    joint's projections and their gradients; 0 for the other runners, whose per-cell hidden tensors dwarf them)."""

    step: int
    lattice: int = 0
    row: int = 0

    @property
    def total(self) -> int:
        """Bytes of a cell of a group computed whole (the rows are counted apart: ``group_bytes``)."""
        return self.step + self.lattice

    def group_bytes(self, samples: int, frames: int, labels_plus_one: int) -> int:
        """Estimated bytes of a group of `samples` padded to `frames` x `labels_plus_one`, computed whole."""
        return samples * (frames * labels_plus_one * self.total + (frames + labels_plus_one) * self.row)


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
    return CellBytes(step, _lattice_bytes(values_per_cell))


def _lattice_bytes(values_per_cell: int) -> int:
    """The lattice's float32 statistics per cell plus 4 bytes of slack (the recursions' temporaries)."""
    return 4 * values_per_cell + 4


def flash_cell_bytes(
    hidden: int,
    projection_dtype: torch.dtype,
    input_width: int,
    input_dtype: torch.dtype,
    values_per_cell: int = 5,
) -> CellBytes:
    """The flash joint's estimate (``flash.FlashRunner``): V appears nowhere, since no logits tile leaves the
    kernels' registers.

    Per lattice cell (``lattice``; ``step`` is 0): what the flash kernels and the recursions keep, the RNN-T
    log-probs [blank, label] (2 x float32), the denominator, alpha and beta (float32 each): ``values_per_cell``
    = 5 values, 20 bytes, plus 4 of slack = 24 bytes.

    Per padded row (``row``; a frame or a label position of the group, H = `hidden`): the projection (H values
    of `projection_dtype`, with its autograd graph), its float32 gradient buffer the backward kernel adds into,
    and that gradient cast back for autograd (H x `projection_dtype`); plus the group's gathered input rows and
    their gradient (`input_width` = max(H_e, H_p) values of `input_dtype`, twice)."""
    row = hidden * (2 * projection_dtype.itemsize + 4) + 2 * input_width * input_dtype.itemsize
    return CellBytes(step=0, lattice=_lattice_bytes(values_per_cell), row=row)


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

    def rows(self) -> int:
        """Padded rows of the whole group: its frames and its label positions, per sample."""
        return len(self.samples) * (self.frames + self.labels_plus_one)

    def step_bytes(self, bytes_per_cell: CellBytes) -> int:
        """Estimated transient memory of one step: a chunk's cells and the whole group's statistics and rows."""
        cost = bytes_per_cell
        return self.cells() * cost.step + self.lattice_cells() * cost.lattice + self.rows() * cost.row


@dataclass(frozen=True)
class Plan:
    """The groups of one sample-wise call, in the order they run, and what the estimate counts."""

    order: tuple[int, ...]  # sample ids, group after group
    groups: tuple[Group, ...]
    bytes_per_cell: CellBytes
    fixed_bytes: int = 0  # inputs, their gradients and the parameter-gradient buffers (not part of the budget)
    runner: str = ""  # how the joint runs: "graph", "fused" or "flash" (``runners``); "" when not planned for one

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
        joint = f" ({self.runner} joint)" if self.runner else ""
        return (
            f"sample-wise transducer loss{joint}: {len(self.order)} samples in {len(self.groups)} groups, "
            f"{self.steps} steps "
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
    runner: str = "",
) -> Plan:
    """Group samples so that each padded group fits `budget`, cutting padding in both T and U.

    Samples are sorted in two dimensions (bands of U_b, then T_b inside a band, longest first), so that
    neighbours are close in both, and grouped greedily while the padded group fits the budget and holds at
    most `max_samples_per_group` samples. A sample whose lattice alone exceeds the budget forms its own group,
    processed in T-chunks of as many frames as fit beside its whole lattice's statistics and rows (at least one;
    with no step bytes, as the flash joint's, chunking saves nothing and the group stays whole).
    `bytes_per_cell` as an int counts per step cell only. `runner` is recorded in the plan.
    """
    cost = bytes_per_cell if isinstance(bytes_per_cell, CellBytes) else CellBytes(bytes_per_cell)
    groups: list[Group] = []
    order: list[int] = []
    members: list[int] = []
    group_frames = group_labels = 0

    def close() -> None:
        n = len(members)
        fits = cost.group_bytes(n, group_frames, group_labels) <= budget or cost.step == 0
        whole_group = n * (group_frames * group_labels * cost.lattice + (group_frames + group_labels) * cost.row)
        chunk = group_frames if fits else max(1, (budget - whole_group) // (n * group_labels * cost.step))
        groups.append(Group(len(order), tuple(members), group_frames, group_labels, min(chunk, group_frames)))
        order.extend(members)

    for b in _sorted_by_labels_then_frames(frames, labels):
        next_frames, next_labels = max(group_frames, frames[b]), max(group_labels, labels[b] + 1)
        full = max_samples_per_group is not None and len(members) >= max_samples_per_group
        too_big = cost.group_bytes(len(members) + 1, next_frames, next_labels) > budget
        if members and (full or too_big):
            close()
            members, next_frames, next_labels = [], frames[b], labels[b] + 1
        members.append(b)
        group_frames, group_labels = next_frames, next_labels
    close()
    return Plan(tuple(order), tuple(groups), cost, fixed_bytes, runner)


def parse_max_samples(value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_samples_per_group must be None or a positive int, got {value!r}")
    return value
