"""Per-step peak memory of the training step (what the loss mode changes)."""

from __future__ import annotations

import torch


class PeakMemoryMeter:
    """CUDA peak allocated memory between :meth:`reset` and :meth:`peak_mib`.

    On CPU it measures nothing (returns None): the process RSS high-water mark cannot be reset per
    step, so it would only ever show the largest step of the run. Use ``scripts/benchmark_*.py`` for
    CPU memory comparisons.
    """

    def reset(self, device: torch.device) -> None:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def peak_mib(self, device: torch.device) -> float | None:
        if device.type != "cuda":
            return None
        return torch.cuda.max_memory_allocated(device) / 2**20
