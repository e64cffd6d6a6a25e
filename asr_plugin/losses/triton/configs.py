"""Launch configurations of the Triton kernels, one function per kernel family: the launches (``ops``) and the
compile check (``compile_check``) both take them from here, so the check compiles what the loss runs."""

from __future__ import annotations

from dataclasses import dataclass

import triton

# Elements of one (BLOCK_R, BLOCK_V) tile of the row kernels, the widest tile along V and the most rows per
# program (every row also holds a dozen per-row values in registers): sized so no kernel spills (compile_check).
ROW_TILE = 1024
MAX_BLOCK_V = 256
MAX_BLOCK_R = 32
# Lanes along u of one piece of an anti-diagonal in the recursions.
MAX_BLOCK_U = 1024


@dataclass(frozen=True)
class RowConfig:
    """The row kernels (log-probs, gradients): BLOCK_R label positions of one frame per program, their scores in
    BLOCK_V-wide tiles."""

    block_r: int
    block_v: int
    block_d: int  # the TDT duration head's tile (>= D); 2 for RNN-T, where it is unused
    num_warps: int

    def grid(self, frame_rows: int, labels_plus_one: int) -> tuple[int, int]:
        """(N * Tc frame rows, blocks of label positions); the second axis stays far below its limit of 65535."""
        return (frame_rows, triton.cdiv(labels_plus_one, self.block_r))


def row_config(vocab: int, labels_plus_one: int, num_durations: int = 0) -> RowConfig:
    block_v = min(triton.next_power_of_2(vocab), MAX_BLOCK_V)
    block_r = min(MAX_BLOCK_R, max(2, ROW_TILE // block_v), max(2, triton.next_power_of_2(labels_plus_one)))
    # 4 tile elements per thread (at 8 per thread ptxas spilled a few bytes in some kernels: compile_check)
    num_warps = max(1, min(8, block_r * block_v // 128))
    return RowConfig(block_r, block_v, max(2, triton.next_power_of_2(num_durations)), num_warps)


@dataclass(frozen=True)
class RecursionConfig:
    """The recursions: one program per sample, anti-diagonals in BLOCK_U-wide pieces."""

    block_u: int
    num_warps: int


def recursion_config(labels_plus_one: int) -> RecursionConfig:
    block_u = min(max(32, triton.next_power_of_2(labels_plus_one)), MAX_BLOCK_U)
    return RecursionConfig(block_u, max(1, min(8, block_u // 128)))


@dataclass(frozen=True)
class FlashConfig:
    """The flash joint's kernels: BLOCK_U label positions per program, logits in (BLOCK_U, BLOCK_V) tiles summed
    over BLOCK_K-wide slices of the hidden size (``tl.dot`` needs 16 at least along each)."""

    block_u: int = 16
    block_v: int = 32
    block_k: int = 16
    num_warps: int = 4

    def grid(self, frame_rows: int, labels_plus_one: int) -> tuple[int, int]:
        return (frame_rows, triton.cdiv(labels_plus_one, self.block_u))


def flash_config() -> FlashConfig:
    """One configuration for every shape: of those compiled for sm_80 and sm_90 (16-32 along each tile
    dimension, 2-8 warps), the only one where no flash kernel spilled in any dtype (compile_check); not tuned
    for speed on a GPU yet."""
    return FlashConfig()
