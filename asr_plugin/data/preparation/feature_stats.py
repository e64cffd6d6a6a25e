"""Global feature statistics over manifests (the preparation pipeline's statistics step, `pipeline`)."""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Sequence

import torch
from torch.utils.data import DataLoader, Dataset

from asr_plugin.data.preparation.child_processes import die_with_parent
from asr_plugin.data.sources.manifest import ManifestEntry
from asr_plugin.frontend.logmel import FeatureStats, LogMelFeatures
from asr_plugin.progress import track


class _SumsDataset(Dataset):
    """Item i -> float64 (sum x, sum x^2, frames) of utterance i's raw log-mel (T, F)."""

    def __init__(self, entries: Sequence[ManifestEntry], featurizer: LogMelFeatures):
        self.entries = entries
        self.featurizer = featurizer

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        with torch.no_grad():
            features = self.featurizer(self.entries[index].load_audio(self.featurizer.sample_rate)).double()
        return features.sum(0), features.square().sum(0), features.shape[0]


def compute_feature_stats(
    entries: Sequence[ManifestEntry],
    featurizer: LogMelFeatures,
    max_utterances: int | None = None,
    num_workers: int = 0,
    seed: int = 0,
    progress: bool = True,
) -> FeatureStats:
    """Mean/std per mel bin over all frames of `entries` (or of `max_utterances` of them drawn with `seed`,
    enough for a stable estimate on large corpora)."""
    if not entries:
        raise ValueError("entries: no utterance to compute feature stats on")
    if max_utterances is not None and max_utterances < len(entries):
        entries = random.Random(seed).sample(list(entries), max_utterances)
    loader = DataLoader(
        _SumsDataset(entries, featurizer),
        batch_size=None,
        num_workers=num_workers,
        worker_init_fn=functools.partial(die_with_parent, os.getpid()),
    )
    total = torch.zeros(featurizer.num_mel_bins, dtype=torch.float64)
    total_sq = torch.zeros_like(total)
    frames = 0
    for item_sum, item_sq, item_frames in track(loader, len(entries), "feature stats", enabled=progress):
        total += item_sum
        total_sq += item_sq
        frames += int(item_frames)
    return FeatureStats.from_sums(total, total_sq, frames)
