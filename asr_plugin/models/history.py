"""Right-aligned per-stream histories: the fixed-size caches of cache-aware streaming.

A history of H entries holds a stream's most recent H entries, the newest last; a stream with fewer
(``filled < H``) has them at the end and zeros before them. Each step appends each stream's own number of
new entries, so streams of a batch may start, pause and end independently.
"""

from __future__ import annotations

import torch


def append_history(history: torch.Tensor, new: torch.Tensor, keep: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """The last H entries of each row's history followed by its first ``keep[b]`` new entries.

    Args:
        history: (B, ..., H, ...) with the entries along `dim`.
        new: (B, ..., T, ...) this step's entries along `dim` (the same other sizes).
        keep: (B,) int64 in [0, T]: how many of row b's new entries are final (the rest are padding, or
            lookahead frames that the next step computes again).
    Returns:
        (B, ..., H, ...).
    """
    size = history.shape[dim]
    joined = torch.cat([history, new], dim=dim)  # (B, ..., H + T, ...)
    index = keep.view(-1, *([1] * (history.dim() - 1))) + torch.arange(size, device=history.device).view(
        *([1] * dim), size, *([1] * (history.dim() - dim - 1))
    )
    return torch.gather(joined, dim, index.expand(history.shape))
