"""Launch configurations of the Triton kernels, one function per kernel family: the launches (``ops``) and the
compile check (``compile_check``) both take them from here, so the check compiles what the loss runs."""

from __future__ import annotations

from dataclasses import dataclass

import triton

# Elements of one (BLOCK_R, BLOCK_V) tile of the row kernels, and the widest tile along V.
ROW_TILE = 2048
MAX_BLOCK_V = 256
# Lanes along u of one piece of an anti-diagonal in the recursions.
MAX_BLOCK_U = 1024


@dataclass(frozen=True)
class RowConfig:
    """The row kernels (log-probs, gradients): BLOCK_R rows per program, their scores in BLOCK_V-wide tiles."""

    block_r: int
    block_v: int
    block_d: int  # the TDT duration head's tile (>= D); 2 for RNN-T, where it is unused
    num_warps: int = 4

    def grid(self, rows: int) -> tuple[int]:
        return (triton.cdiv(rows, self.block_r),)


def row_config(vocab: int, num_durations: int = 0) -> RowConfig:
    block_v = min(triton.next_power_of_2(vocab), MAX_BLOCK_V)
    return RowConfig(max(2, ROW_TILE // block_v), block_v, max(2, triton.next_power_of_2(num_durations)))


@dataclass(frozen=True)
class RecursionConfig:
    """The recursions: one program per sample, anti-diagonals in BLOCK_U-wide pieces."""

    block_u: int
    num_warps: int


def recursion_config(labels_plus_one: int) -> RecursionConfig:
    block_u = min(max(32, triton.next_power_of_2(labels_plus_one)), MAX_BLOCK_U)
    return RecursionConfig(block_u, max(1, min(8, block_u // 128)))
