"""Map-style dataset over a manifest and the collate function that builds a `Batch`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import Dataset

from asr_plugin.data.loading.augment import speed_perturb
from asr_plugin.data.loading.batch import Batch
from asr_plugin.data.sources.manifest import ManifestEntry
from asr_plugin.text.tokenizer import Tokenizer


@dataclass
class Utterance:
    """One item: its transcript as the tokenizer normalises it, features (T, F) float32, tokens (U,) int64."""

    id: str
    text: str
    features: torch.Tensor
    tokens: torch.Tensor


class ManifestDataset(Dataset):
    """Loads audio (soundfile; the entry's segment, resampled to the front end's rate), optionally speed-perturbs it, computes features with the front end and
    encodes the transcript (normalised by the tokenizer, which is also the reference text of the item).

    Args:
        entries: manifest entries.
        tokenizer: normalises and encodes `entry.text`.
        frontend: a built front end (`asr_plugin.data.build_frontend`): (1, S) audio, (1,) length ->
            (1, T, F) features, (1,) frames. Its mode matters: a NeMo front end dithers in training mode.
        speed_factors: e.g. (0.9, 1.0, 1.1): each item picks one uniformly (training only); None = off.
    """

    def __init__(
        self,
        entries: Sequence[ManifestEntry],
        tokenizer: Tokenizer,
        frontend: nn.Module,
        speed_factors: Sequence[float] | None = None,
    ):
        self.entries = list(entries)
        self.tokenizer = tokenizer
        self.frontend = frontend
        self.speed_factors = tuple(speed_factors) if speed_factors else None

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def durations(self) -> list[float]:
        """Seconds per item (before speed perturbation), for the batch sampler."""
        return [entry.duration for entry in self.entries]

    def __getitem__(self, index: int) -> Utterance:
        entry = self.entries[index]
        sample_rate = self.frontend.sample_rate
        waveform = entry.load_audio(sample_rate)  # (N,), resampled and averaged to mono
        return make_utterance(
            entry.id,
            f"{entry.id} ({entry.path})",
            entry.text,
            waveform,
            self.tokenizer,
            self.frontend,
            self.speed_factors,
            sample_rate,
        )


def make_utterance(
    uid: str,
    where: str,
    text: str,
    waveform: torch.Tensor,
    tokenizer: Tokenizer,
    frontend: nn.Module,
    speed_factors: Sequence[float] | None,
    sample_rate: int,
) -> Utterance:
    """An item from its (N,) audio at the front end's rate: optional speed perturbation, features, the
    transcript normalised and encoded (what every dataset, map-style or streamed, yields). Errors name `where`."""
    if speed_factors:
        # DataLoader seeds `random` differently in every worker and epoch.
        waveform = speed_perturb(waveform, random.choice(speed_factors), sample_rate)
    try:
        with torch.no_grad():
            features, frames = frontend(waveform.unsqueeze(0), torch.tensor([waveform.numel()]))
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    normalized = tokenizer.normalize(text)
    tokens = torch.tensor(tokenizer.encode(normalized), dtype=torch.int64)
    if tokens.numel() == 0:
        raise ValueError(f"{where}: transcript {text!r} encodes to no token")
    return Utterance(uid, normalized, features[0, : int(frames[0])], tokens)


def collate_utterances(items: Sequence[Utterance]) -> Batch:
    """Zero-pads features (B, T_max, F) and targets (B, U_max) (0 = blank id as padding)."""
    feature_lengths = torch.tensor([u.features.shape[0] for u in items], dtype=torch.int64)
    target_lengths = torch.tensor([u.tokens.shape[0] for u in items], dtype=torch.int64)
    features = torch.nn.utils.rnn.pad_sequence([u.features for u in items], batch_first=True)
    targets = torch.nn.utils.rnn.pad_sequence([u.tokens for u in items], batch_first=True, padding_value=0)
    return Batch(
        features=features,
        feature_lengths=feature_lengths,
        targets=targets,
        target_lengths=target_lengths,
        ids=[u.id for u in items],
        texts=[u.text for u in items],
    )
