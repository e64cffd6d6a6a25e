"""The one batch type shared by the data module, the Lightning module and decoding."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Batch:
    """A padded mini-batch of utterances.

    Attributes:
        features: (B, T_feat, F) float32 features of the data's front end, zero-padded in time.
        feature_lengths: (B,) int64 valid frames per utterance.
        targets: (B, U) int64 token ids (never the blank id 0 inside a length), padded with 0.
        target_lengths: (B,) int64 valid tokens per utterance.
        ids: B utterance ids (e.g. "1272-128104-0000").
        texts: B reference transcripts, normalised by the tokenizer (what the WER is scored against).
    """

    features: torch.Tensor
    feature_lengths: torch.Tensor
    targets: torch.Tensor
    target_lengths: torch.Tensor
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return self.features.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """Returns a copy with every tensor on `device` (Lightning calls this via transfer_batch_to_device)."""
        return Batch(
            features=self.features.to(device, non_blocking=non_blocking),
            feature_lengths=self.feature_lengths.to(device, non_blocking=non_blocking),
            targets=self.targets.to(device, non_blocking=non_blocking),
            target_lengths=self.target_lengths.to(device, non_blocking=non_blocking),
            ids=self.ids,
            texts=self.texts,
        )

    def pin_memory(self) -> "Batch":
        """Pins every tensor, so DataLoader(pin_memory=True) works with this type."""
        return Batch(
            features=self.features.pin_memory(),
            feature_lengths=self.feature_lengths.pin_memory(),
            targets=self.targets.pin_memory(),
            target_lengths=self.target_lengths.pin_memory(),
            ids=self.ids,
            texts=self.texts,
        )
