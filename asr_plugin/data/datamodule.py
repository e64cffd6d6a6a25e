"""`TransducerDataModule`: manifests, tokenizer and feature stats from config, prepared on demand, and
DataLoaders of `Batch` for training, validation and any named evaluation set.

Typical use (what the training code does):

    dm = hydra.utils.instantiate(cfg.data)
    dm.prepare_data()        # makes whatever is missing: mini corpus, manifests, tokenizer, stats
    dm.setup("fit")
    V, F = dm.tokenizer.vocab_size, dm.feature_dim
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from asr_plugin.data.dataset import ManifestDataset, collate_utterances
from asr_plugin.data.features import FeatureStats, GlobalNormalize, LogMelFeatures
from asr_plugin.data.loader import ResumableDataLoader
from asr_plugin.data.manifest import ManifestEntry, read_manifest
from asr_plugin.data.mini_corpus import make_mini_librispeech
from asr_plugin.data.prepare import manifest_path, prepare_split
from asr_plugin.data.sampler import DurationBatchSampler
from asr_plugin.data.stats import compute_feature_stats
from asr_plugin.data.tokenizer import Tokenizer, train_tokenizer

CORPORA = ("librispeech", "mini")


class TransducerDataModule(L.LightningDataModule):
    """Data for transducer training on a LibriSpeech-layout corpus.

    Args:
        root: corpus directory holding one folder per split.
        manifest_dir: where manifests (<split>.jsonl), the tokenizer and the stats are written.
        corpus: "mini" (generated under `root` by `prepare_data` when missing) or "librispeech"
            (must already be there; see scripts/prepare_librispeech.py for the download).
        train_splits, valid_splits, test_splits: split folder names under `root`.
        vocab_size, tokenizer_type: SentencePiece size (including the blank) and "bpe" or "unigram".
        tokenizer_path: the .model file; default `<manifest_dir>/tokenizer_<type><vocab_size>.model`.
        stats_path: feature stats JSON; default `<manifest_dir>/feature_stats.json`.
        stats_max_utterances: compute stats on this many random training utterances (None = all).
        max_duration: padded seconds of audio per batch (its cost with `quadratic_duration`).
        max_utterance_duration: longer training utterances are dropped (None = keep every one; the sampler
            then needs `max_duration` to hold the longest).
        quadratic_duration: None, or Q: an utterance of d seconds costs `d + d**2 / Q` of `max_duration`
            (see `DurationBatchSampler`).
        num_buckets: duration buckets of the training sampler.
        num_workers, pin_memory, persistent_workers: DataLoader options.
        speed_perturb: e.g. [0.9, 1.0, 1.1] for training (None or [] = off).
        num_mel_bins: feature dimension F.
        seed: batch order seed (per epoch, identical on all ranks).
        num_replicas, rank: DDP layout; None = from the attached Trainer, else torch.distributed.
        prepare_num_workers: processes checking audio while writing manifests.
        mini_corpus: keyword arguments of `make_mini_librispeech` (n_train, n_dev, n_test, seed).
    """

    def __init__(self, root: str, manifest_dir: str, corpus: str = "librispeech",
                 train_splits: Sequence[str] = ("train-clean-100", "train-clean-360", "train-other-500"),
                 valid_splits: Sequence[str] = ("dev-clean",),
                 test_splits: Sequence[str] = ("dev-clean", "dev-other", "test-clean", "test-other"),
                 vocab_size: int = 500, tokenizer_type: str = "bpe", tokenizer_path: str | None = None,
                 stats_path: str | None = None, stats_max_utterances: int | None = None,
                 max_duration: float = 200.0, max_utterance_duration: float | None = None,
                 quadratic_duration: float | None = None,
                 num_buckets: int = 10, num_workers: int = 2, pin_memory: bool = False,
                 persistent_workers: bool = True, speed_perturb: Sequence[float] | None = None,
                 num_mel_bins: int = 80, seed: int = 0, num_replicas: int | None = None, rank: int | None = None,
                 prepare_num_workers: int = 2, mini_corpus: dict[str, Any] | None = None):
        super().__init__()
        if corpus not in CORPORA:
            raise ValueError(f"corpus must be one of {CORPORA}, got {corpus!r}")
        if not train_splits or not valid_splits:
            raise ValueError("train_splits and valid_splits must name at least one split each")
        self.root = Path(root)
        self.manifest_dir = Path(manifest_dir)
        self.corpus = corpus
        self.train_splits = list(train_splits)
        self.valid_splits = list(valid_splits)
        self.test_splits = list(test_splits)
        self.vocab_size_requested = vocab_size
        self.tokenizer_type = tokenizer_type
        default_tokenizer = self.manifest_dir / f"tokenizer_{tokenizer_type}{vocab_size}.model"
        self.tokenizer_path = Path(tokenizer_path or default_tokenizer)
        self.stats_path = Path(stats_path or self.manifest_dir / "feature_stats.json")
        self.stats_max_utterances = stats_max_utterances
        self.max_duration = max_duration
        if max_utterance_duration is not None and max_utterance_duration > max_duration:
            raise ValueError(f"max_utterance_duration={max_utterance_duration} exceeds max_duration={max_duration}")
        self.max_utterance_duration = max_utterance_duration
        self.quadratic_duration = quadratic_duration
        self.num_buckets = num_buckets
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers and num_workers > 0
        self.speed_perturb = list(speed_perturb) if speed_perturb else None
        self.featurizer = LogMelFeatures(num_mel_bins=num_mel_bins)
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.prepare_num_workers = prepare_num_workers
        self.mini_corpus = dict(mini_corpus or {})
        self._tokenizer: Tokenizer | None = None
        self._normalize: GlobalNormalize | None = None
        self._train_entries: list[ManifestEntry] | None = None

    # ---- what the model needs before it is built -------------------------------------------------------
    @property
    def feature_dim(self) -> int:
        """F, the size of the last feature axis."""
        return self.featurizer.num_mel_bins

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer (loaded on first use; `prepare_data()` trains it when missing)."""
        if self._tokenizer is None:
            if not self.tokenizer_path.is_file():
                raise FileNotFoundError(f"tokenizer {self.tokenizer_path} does not exist; call prepare_data() first")
            self._tokenizer = Tokenizer(self.tokenizer_path)
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        """Output size of the model: the tokenizer's vocabulary including the blank (id 0)."""
        return self.tokenizer.vocab_size

    # ---- preparation -----------------------------------------------------------------------------------
    def split_manifest(self, split: str) -> Path:
        """Manifest path of a split name."""
        return manifest_path(self.manifest_dir, split)

    @property
    def test_manifests(self) -> dict[str, Path]:
        """{split name: manifest path} for `test_splits`, for decoding each set separately."""
        return {split: self.split_manifest(split) for split in self.test_splits}

    def prepare_data(self) -> None:
        """Makes everything missing, reusing what exists: the mini corpus (corpus="mini"), the manifests of
        all splits, the tokenizer (from the training transcripts) and the feature stats."""
        if self.corpus == "mini":
            make_mini_librispeech(self.root, **self.mini_corpus)
        for split in dict.fromkeys(self.train_splits + self.valid_splits + self.test_splits):
            if not self.split_manifest(split).exists():
                prepare_split(self.root, split, self.manifest_dir, num_workers=self.prepare_num_workers)
        train_entries = self._read_splits(self.train_splits)
        if not self.tokenizer_path.exists():
            train_tokenizer((e.text for e in train_entries), self.tokenizer_path, self.vocab_size_requested,
                            self.tokenizer_type)
        if not self.stats_path.exists():
            stats = compute_feature_stats(train_entries, self.featurizer, self.stats_max_utterances,
                                          num_workers=self.num_workers, seed=self.seed)
            stats.save(self.stats_path)

    def missing_prepared(self) -> list[Path]:
        """The files `prepare_data()` would write that do not exist yet (manifests, tokenizer, stats)."""
        splits = dict.fromkeys(self.train_splits + self.valid_splits + self.test_splits)
        wanted = [self.split_manifest(split) for split in splits] + [self.tokenizer_path, self.stats_path]
        return [path for path in wanted if not path.exists()]

    def setup(self, stage: str | None = None) -> None:
        """Loads tokenizer, stats and the training manifests (no writing; call `prepare_data()` first)."""
        self.tokenizer  # noqa: B018 - loads it, or says to run prepare_data()
        if not self.stats_path.is_file():
            raise FileNotFoundError(f"feature stats {self.stats_path} do not exist; call prepare_data() first")
        stats = FeatureStats.load(self.stats_path)
        if stats.mean.numel() != self.feature_dim:
            raise ValueError(f"{self.stats_path}: {stats.mean.numel()} dims, features have {self.feature_dim}")
        self._normalize = GlobalNormalize(stats)
        if stage in (None, "fit") and self._train_entries is None:
            self._train_entries = self._filter_long(self._read_splits(self.train_splits))

    def _read_splits(self, splits: Sequence[str]) -> list[ManifestEntry]:
        return [entry for split in splits for entry in read_manifest(self.split_manifest(split))]

    def _filter_long(self, entries: list[ManifestEntry]) -> list[ManifestEntry]:
        if self.max_utterance_duration is None:
            return entries
        kept = [e for e in entries if e.duration <= self.max_utterance_duration]
        if len(kept) < len(entries):
            warnings.warn(f"dropped {len(entries) - len(kept)} training utterance(s) longer than "
                          f"{self.max_utterance_duration} s", stacklevel=2)
        return kept

    # ---- loaders ---------------------------------------------------------------------------------------
    def _replicas(self) -> tuple[int | None, int | None]:
        if self.num_replicas is not None or self.rank is not None:
            return self.num_replicas, self.rank
        trainer = getattr(self, "trainer", None)
        if trainer is not None:
            return trainer.world_size, trainer.global_rank
        return None, None  # the sampler asks torch.distributed

    def _loader(self, entries: list[ManifestEntry], train: bool) -> ResumableDataLoader:
        if self._normalize is None:
            raise RuntimeError("call setup() (after prepare_data()) before asking for a dataloader")
        dataset = ManifestDataset(entries, self.tokenizer, self.featurizer, self._normalize,
                                  self.speed_perturb if train else None)
        num_replicas, rank = self._replicas()
        # Evaluation batches may hold any utterance, so their limit grows to the longest one.
        max_duration = self.max_duration if train else max(self.max_duration, max(dataset.durations))
        sampler = DurationBatchSampler(dataset.durations, max_duration, self.num_buckets, shuffle=train,
                                       seed=self.seed, num_replicas=num_replicas, rank=rank,
                                       quadratic_duration=self.quadratic_duration if train else None)
        return ResumableDataLoader(dataset, sampler, collate_fn=collate_utterances, num_workers=self.num_workers,
                                   pin_memory=self.pin_memory, persistent_workers=self.persistent_workers and train)

    def train_dataloader(self) -> DataLoader:
        """Shuffled, duration-bucketed batches (deterministic per seed and epoch, split across ranks)."""
        if self._train_entries is None:
            self.setup("fit")
        return self._loader(self._train_entries, train=True)

    def val_dataloader(self) -> DataLoader:
        """All `valid_splits` together, batches sorted by duration."""
        return self._loader(self._read_splits(self.valid_splits), train=False)

    def eval_dataloader(self, manifest: str | os.PathLike) -> DataLoader:
        """Sorted batches of one manifest: a path, or a split name (e.g. "test-clean")."""
        path = Path(manifest)
        if not path.suffix and not path.exists():
            path = self.split_manifest(str(manifest))
        return self._loader(read_manifest(path), train=False)

    def test_dataloader(self) -> list[DataLoader]:
        """One sorted loader per `test_splits` entry, in that order."""
        return [self.eval_dataloader(path) for path in self.test_manifests.values()]
