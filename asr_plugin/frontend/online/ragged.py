"""Left-aligned per-stream buffers that grow and shrink by each stream's own amount: the sample and feature
histories of streaming (`frames.StreamingFrames`, `feature_buffer.FeatureBuffer`).

A buffer (B, K, ...) holds ``held[b]`` entries of stream b in its first positions; the rest is padding.
"""

from __future__ import annotations

import torch


def _expand(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(B, K) positions -> (B, K, ...) to gather `like`'s trailing dimensions with."""
    return index.view(*index.shape, *([1] * (like.dim() - 2))).expand(*index.shape, *like.shape[2:])


def append_ragged(
    buffer: torch.Tensor, held: torch.Tensor, new: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each stream's held entries followed by its first ``lengths[b]`` entries of `new`.

    Args:
        buffer: (B, K, ...), stream b's first ``held[b]`` entries valid.
        held: (B,) int64.
        new: (B, T, ...) with the same trailing sizes.
        lengths: (B,) int64 in [0, T].
    Returns:
        (B, max(held + lengths), ...) and the new (B,) counts.
    """
    total = held + lengths
    width = int(total.max()) if total.numel() else 0
    joined = torch.cat([buffer, new.to(buffer.dtype)], dim=1)  # (B, K + T, ...)
    if width == 0:
        return joined[:, :0], total
    steps = torch.arange(width, device=buffer.device)[None, :]  # (1, W)
    index = torch.where(steps < held[:, None], steps, buffer.shape[1] + steps - held[:, None])
    index = index.clamp(max=joined.shape[1] - 1)  # positions past a stream's total: padding
    return torch.gather(joined, 1, _expand(index, joined)), total


def drop_front(buffer: torch.Tensor, held: torch.Tensor, drop: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each stream's entries without its first ``drop[b]`` (<= ``held[b]``): (B, max(held - drop), ...) and the
    new (B,) counts."""
    kept = held - drop
    width = int(kept.max()) if kept.numel() else 0
    if width == 0 or buffer.shape[1] == 0:
        return buffer[:, :0], kept
    index = (torch.arange(width, device=buffer.device)[None, :] + drop[:, None]).clamp(max=buffer.shape[1] - 1)
    return torch.gather(buffer, 1, _expand(index, buffer)), kept


def checked_lengths(
    new: torch.Tensor, lengths: torch.Tensor, batch_size: int, finished: torch.Tensor, name: str, ndim: int
) -> torch.Tensor:
    """(B,) int64 `lengths` of the (B, T, ...) piece `new` to append to a buffer of `batch_size` streams, checked
    (ValueError naming `name`): `ndim` dimensions, one integer length per stream in [0, T], nothing for a stream
    that has ended (`finished`, (B,) bool)."""
    if new.ndim != ndim or lengths.shape != new.shape[:1] or lengths.is_floating_point():
        raise ValueError(
            f"{name} must have {ndim} dimensions (B, T, ...) with integer lengths (B,), got {tuple(new.shape)} and "
            f"{lengths.dtype} {tuple(lengths.shape)}"
        )
    if new.shape[0] != batch_size:
        raise ValueError(
            f"{name} has {new.shape[0]} streams, the state {batch_size} (each batch of streams has its own state)"
        )
    lengths = lengths.to(finished.device).long()
    if bool(((lengths < 0) | (lengths > new.shape[1])).any()):
        raise ValueError(f"lengths must lie in [0, {new.shape[1]}] (the width of {name}), got {lengths.tolist()}")
    late = finished & (lengths > 0)
    if bool(late.any()):
        raise ValueError(f"stream {int(late.nonzero()[0])} has ended: it takes no more {name}")
    return lengths
