"""Map-style dataset over a manifest and the collate function that builds a `Batch`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset

from asr_plugin.data.audio import load_audio
from asr_plugin.data.augment import speed_perturb
from asr_plugin.data.batch import Batch
from asr_plugin.data.features import GlobalNormalize, LogMelFeatures
from asr_plugin.data.manifest import ManifestEntry
from asr_plugin.data.tokenizer import Tokenizer


@dataclass
class Utterance:
    """One item: features (T, F) float32 and tokens (U,) int64."""

    id: str
    text: str
    features: torch.Tensor
    tokens: torch.Tensor


class ManifestDataset(Dataset):
    """Loads audio (soundfile), optionally speed-perturbs it, computes normalised log-mel features and
    encodes the transcript.

    Args:
        entries: manifest entries.
        tokenizer: encodes `entry.text`.
        featurizer: waveform -> (T, F) features.
        normalize: global mean/variance normalisation, or None for raw log-mel.
        speed_factors: e.g. (0.9, 1.0, 1.1): each item picks one uniformly (training only); None = off.
    """

    def __init__(self, entries: Sequence[ManifestEntry], tokenizer: Tokenizer, featurizer: LogMelFeatures,
                 normalize: GlobalNormalize | None = None, speed_factors: Sequence[float] | None = None):
        self.entries = list(entries)
        self.tokenizer = tokenizer
        self.featurizer = featurizer
        self.normalize = normalize
        self.speed_factors = tuple(speed_factors) if speed_factors else None

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def durations(self) -> list[float]:
        """Seconds per item (before speed perturbation), for the batch sampler."""
        return [entry.duration for entry in self.entries]

    def __getitem__(self, index: int) -> Utterance:
        entry = self.entries[index]
        waveform = load_audio(entry.path, self.featurizer.sample_rate)  # (N,)
        if self.speed_factors:
            # DataLoader seeds `random` differently in every worker and epoch.
            waveform = speed_perturb(waveform, random.choice(self.speed_factors), self.featurizer.sample_rate)
        with torch.no_grad():
            features = self.featurizer(waveform)  # (T, F)
            if self.normalize is not None:
                features = self.normalize(features)
        tokens = torch.tensor(self.tokenizer.encode(entry.text), dtype=torch.int64)
        if tokens.numel() == 0:
            raise ValueError(f"{entry.id} ({entry.path}): transcript {entry.text!r} encodes to no token")
        return Utterance(entry.id, entry.text, features, tokens)


def collate_utterances(items: Sequence[Utterance]) -> Batch:
    """Zero-pads features (B, T_max, F) and targets (B, U_max) (0 = blank id as padding)."""
    feature_lengths = torch.tensor([u.features.shape[0] for u in items], dtype=torch.int64)
    target_lengths = torch.tensor([u.tokens.shape[0] for u in items], dtype=torch.int64)
    features = torch.nn.utils.rnn.pad_sequence([u.features for u in items], batch_first=True)
    targets = torch.nn.utils.rnn.pad_sequence([u.tokens for u in items], batch_first=True, padding_value=0)
    return Batch(features=features, feature_lengths=feature_lengths, targets=targets,
                 target_lengths=target_lengths, ids=[u.id for u in items], texts=[u.text for u in items])
