"""The preparation of a configuration that trains on a Lhotse Shar directory (``data.train_shar``): its plan
(`SharPlan`: the manifests of the validation and test sets only) and `prepare_shar`, which makes the tokenizer
from the transcripts of the Shar's metadata (no audio read) and the feature statistics from the first
`max_utterances` cuts of the shards in a seeded order (whole shards read in turn)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from asr_plugin.data.preparation.pipeline import CorpusPlan
from asr_plugin.data.preparation.work_lock import preparation_lock
from asr_plugin.data.sources.shar_cuts import cut_text, read_shar_cuts, shar_cut_audio
from asr_plugin.frontend.logmel import FeatureStats, LogMelFeatures
from asr_plugin.text.tokenizer import train_tokenizer


def shar_texts(shards: Sequence[dict[str, Path]]) -> Iterator[str]:
    """Every transcript of the Shar's metadata (no audio read), for the tokenizer."""
    for cut in read_shar_cuts(shards, with_audio=False):
        text = cut_text(cut)
        if text:
            yield text


def shar_feature_stats(
    shards: Sequence[dict[str, Path]], featurizer: LogMelFeatures, max_utterances: int | None, seed: int = 0
) -> FeatureStats:
    """Mean/std per mel bin over the first `max_utterances` cuts with a transcript (None: all) of the shards
    in a seeded order: whole shards are read in turn, never the rest of the directory."""
    order = list(shards)
    random.Random(seed).shuffle(order)
    total = torch.zeros(featurizer.num_mel_bins, dtype=torch.float64)
    total_sq = torch.zeros_like(total)
    frames = used = 0
    for cut in read_shar_cuts(order, with_audio=True):
        if max_utterances is not None and used >= max_utterances:
            break
        if not cut_text(cut):
            continue
        with torch.no_grad():
            features = featurizer(shar_cut_audio(cut, featurizer.sample_rate)).double()
        total += features.sum(0)
        total_sq += features.square().sum(0)
        frames += features.shape[0]
        used += 1
    return FeatureStats.from_sums(total, total_sq, frames)


@dataclass(frozen=True)
class SharPlan(CorpusPlan):
    """The preparation plan of a configuration that trains on a Shar directory: its manifests are those of the
    validation and test sets; the tokenizer and statistics come from the Shar (`prepare_shar`), not from a
    training manifest, so the pipeline's steps that read one say where they are made instead."""

    def read_training_entries(self) -> list:
        raise ValueError(
            f"{self.source!r}: the training set is a Shar directory, streamed, with no manifest: its tokenizer "
            "and feature statistics are made by the data module's prepare_data() (train.py runs it on rank 0); "
            "scripts/prepare_data.py makes only --steps manifests (the validation and test sets)"
        )


def prepare_shar(plan: CorpusPlan, shards: Sequence[dict[str, Path]], max_utterances: int | None) -> list[Path]:
    """Makes what is missing of the tokenizer (trained on every transcript of the Shar's metadata) and the
    feature statistics (`shar_feature_stats`) of `plan`, under the work directory's lock, each file written
    atomically; returns the files written."""
    written = []
    with preparation_lock(plan.layout.work_dir):
        if plan.tokenizer_path is not None and not plan.tokenizer_path.exists():
            tokenizer = train_tokenizer(
                shar_texts(shards),
                plan.tokenizer_path,
                plan.vocab_size,
                plan.tokenizer_type,
                vocab_key="data.vocab_size",
            )
            print(f"tokenizer: wrote {plan.tokenizer_path} ({tokenizer.vocab_size} ids) from the Shar's transcripts")
            written.append(plan.tokenizer_path)
        if plan.stats_path is not None and not plan.stats_path.exists():
            stats = shar_feature_stats(shards, LogMelFeatures(**plan.stats_features), max_utterances, plan.seed)
            stats.save(plan.stats_path)
            print(f"feature stats: wrote {plan.stats_path} from {stats.num_frames} frames of the Shar")
            written.append(plan.stats_path)
    return written
