"""The feature frames of B streams that an encoder stream has received and not yet let go of."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from asr_plugin.frontend.online.ragged import append_ragged, checked_lengths, drop_front


@dataclass(frozen=True)
class FeatureBuffer:
    """Feature frames of B streams (a value: its methods return new ones).

    Attributes:
        features: (B, K, F) each stream's kept frames, left-aligned (``held[b]`` of them).
        start: (B,) int64 index (in the stream) of each stream's first kept frame.
        received: (B,) int64 frames received so far.
        finished: (B,) bool, streams whose end has come (`ended`).
    """

    features: torch.Tensor
    start: torch.Tensor
    received: torch.Tensor
    finished: torch.Tensor

    @classmethod
    def empty(cls, batch_size: int, feature_dim: int, device: torch.device | str = "cpu") -> FeatureBuffer:
        zeros = torch.zeros(batch_size, dtype=torch.long, device=device)
        return cls(
            features=torch.zeros(batch_size, 0, feature_dim, device=device),
            start=zeros,
            received=zeros,
            finished=torch.zeros(batch_size, dtype=torch.bool, device=device),
        )

    @property
    def batch_size(self) -> int:
        return self.features.shape[0]

    @property
    def held(self) -> torch.Tensor:
        """(B,) int64 frames kept per stream."""
        return self.received - self.start

    def appended(self, features: torch.Tensor, lengths: torch.Tensor) -> FeatureBuffer:
        """With stream b's first ``lengths[b]`` frames of (B, T, F) `features` appended; ValueError naming the
        argument for a wrong shape, batch size, feature size or length, or frames for a finished stream."""
        lengths = checked_lengths(features, lengths, self.batch_size, self.finished, "features", 3)
        if features.shape[2] != self.features.shape[2]:
            raise ValueError(f"features have F={features.shape[2]} bins, the state {self.features.shape[2]}")
        kept, _ = append_ragged(self.features, self.held, features.to(self.features.device), lengths)
        return replace(self, features=kept, received=self.received + lengths)

    def ended(self, streams: torch.Tensor) -> FeatureBuffer:
        """With the streams where `streams` ((B,) bool) is True marked finished."""
        if streams.shape != self.finished.shape or streams.dtype != torch.bool:
            raise ValueError(
                f"streams must be a (B,)=({self.batch_size},) bool tensor, got {streams.dtype} {tuple(streams.shape)}"
            )
        return replace(self, finished=self.finished | streams.to(self.finished.device))

    def dropped_before(self, first_kept: torch.Tensor) -> FeatureBuffer:
        """Without the frames before index ``first_kept[b]`` of each stream (kept ones stay)."""
        drop = (torch.minimum(first_kept, self.received) - self.start).clamp(min=0)
        kept, _ = drop_front(self.features, self.held, drop)
        return replace(self, features=kept, start=self.start + drop)

    def frames(self, first: torch.Tensor, count: torch.Tensor, width: int | None = None) -> torch.Tensor:
        """(B, W, F) frames ``first[b] ... first[b] + count[b] - 1`` of each stream (they must be kept), then zeros;
        W = `width` or max(count)."""
        width = int(count.max()) if width is None else width
        steps = torch.arange(width, device=first.device)[None, :]  # (1, W)
        index = ((first - self.start)[:, None] + steps).clamp(0, max(self.features.shape[1] - 1, 0))
        if self.features.shape[1] == 0:
            return self.features.new_zeros(self.batch_size, width, self.features.shape[2])
        gathered = torch.gather(self.features, 1, index[..., None].expand(-1, -1, self.features.shape[2]))
        return gathered.masked_fill((steps >= count[:, None]).unsqueeze(-1), 0.0)
