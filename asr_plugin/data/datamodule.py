"""`TransducerDataModule`: reads the prepared manifests, tokenizer and front end of a data config and makes
DataLoaders of `Batch` for training, validation and any named evaluation set.

Typical use (what the training code does):

    dm = hydra.utils.instantiate(cfg.data)
    dm.prepare_data()        # = prepare_corpus(dm.plan): makes what is missing (rank 0 only, in a DDP job)
    dm.setup("fit")          # reads; says which files are missing and the command that makes them
    V, F = dm.tokenizer.vocab_size, dm.feature_dim
    dm.tokenizer.record(), dm.frontend_spec   # plain data for the checkpoint
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
from torch import nn
from torch.utils.data import DataLoader

from asr_plugin.data.dataset import ManifestDataset, collate_utterances
from asr_plugin.data.features import FeatureStats
from asr_plugin.data.frontend import (build_frontend, complete_frontend_spec, frontend_feature_dim,
                                      frontend_needs_stats, with_stats)
from asr_plugin.data.layout import CorpusLayout
from asr_plugin.data.loader import ResumableDataLoader
from asr_plugin.data.manifest import ManifestEntry, audio_problems, read_manifest
from asr_plugin.data.pipeline import CorpusPlan, prepare_corpus
from asr_plugin.data.sampler import DurationBatchSampler
from asr_plugin.data.text import NormalizationCounts
from asr_plugin.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

SHOWN_PROBLEMS = 20  # files listed by name in an error; the rest are counted


class TransducerDataModule(L.LightningDataModule):
    """Data for transducer training on a LibriSpeech-layout corpus.

    Args:
        root: corpus directory holding one folder per split; only read (it may be read-only).
        work_dir: where the manifests (<split>.jsonl), tokenizer and statistics are written and read
            (`CorpusLayout` derives every path); never inside `root`.
        corpus: "mini" (generated under `root` by `prepare_data` when missing) or "librispeech"
            (must already be there; ``scripts/prepare_data.py --download`` fetches it).
        train_splits, valid_splits, test_splits: split folder names under `root`.
        vocab_size, tokenizer_type: SentencePiece size (including the blank) and "bpe" or "unigram" of the
            tokenizer `prepare_data` trains.
        tokenizer: an already built `Tokenizer` (e.g. a NeMo checkpoint's, from a `_target_` node); then no
            tokenizer is trained and `vocab_size`, `tokenizer_type` and `tokenizer_path` are not used.
        tokenizer_path: the trained .model file; default `<work_dir>/tokenizer_<type><vocab_size>.model`.
        frontend: a front-end spec (`asr_plugin.data.frontend`); None = log-mel with `num_mel_bins` bins
            normalised with global statistics of the training data. A "logmel" spec without mean/std
            gets them from the statistics too; a "nemo" spec needs none.
        num_mel_bins: F of the default front end; with a `frontend` spec it must be None or agree.
        stats_path: feature statistics JSON; default `<work_dir>/feature_stats.json`.
        stats_max_utterances: compute statistics on this many random training utterances (None = all).
        max_duration: padded seconds of audio per batch (its cost with `quadratic_duration`).
        max_utterance_duration: longer training utterances are dropped (None = keep every one; the sampler
            then needs `max_duration` to hold the longest).
        quadratic_duration: None, or Q: an utterance of d seconds costs `d + d**2 / Q` of `max_duration`
            (see `DurationBatchSampler`).
        num_buckets: duration buckets of the training sampler.
        num_workers, pin_memory, persistent_workers: DataLoader options.
        speed_perturb: e.g. [0.9, 1.0, 1.1] for training (None or [] = off).
        seed: batch order seed (per epoch, identical on all ranks); also of the statistics' sample.
        num_replicas, rank: DDP layout; None = from the attached Trainer, else torch.distributed.
        prepare_num_workers: processes checking audio and computing statistics in `prepare_data`.
        prepare_timeout_s: how long the other ranks of a job wait for rank 0's preparation.
        mini_corpus: keyword arguments of `make_mini_librispeech` (n_train, n_dev, n_test, seed).
    """

    def __init__(self, root: str, work_dir: str, corpus: str = "librispeech",
                 train_splits: Sequence[str] = ("train-clean-100", "train-clean-360", "train-other-500"),
                 valid_splits: Sequence[str] = ("dev-clean",),
                 test_splits: Sequence[str] = ("dev-clean", "dev-other", "test-clean", "test-other"),
                 vocab_size: int = 500, tokenizer_type: str = "bpe", tokenizer: Tokenizer | None = None,
                 tokenizer_path: str | None = None, frontend: Mapping[str, Any] | None = None,
                 num_mel_bins: int | None = None, stats_path: str | None = None,
                 stats_max_utterances: int | None = None, max_duration: float = 200.0,
                 max_utterance_duration: float | None = None, quadratic_duration: float | None = None,
                 num_buckets: int = 10, num_workers: int = 2, pin_memory: bool = False,
                 persistent_workers: bool = True, speed_perturb: Sequence[float] | None = None, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None, prepare_num_workers: int = 2,
                 prepare_timeout_s: float = 3600.0, mini_corpus: dict[str, Any] | None = None):
        super().__init__()
        if not train_splits or not valid_splits:
            raise ValueError("train_splits and valid_splits must name at least one split each")
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"data.tokenizer must build an asr_plugin.data.Tokenizer, got {type(tokenizer).__name__}")
        if max_utterance_duration is not None and max_utterance_duration > max_duration:
            raise ValueError(f"max_utterance_duration={max_utterance_duration} exceeds max_duration={max_duration}")
        if prepare_timeout_s <= 0:
            raise ValueError(f"prepare_timeout_s must be positive, got {prepare_timeout_s}")
        spec = complete_frontend_spec(frontend if frontend is not None else
                                      {"kind": "logmel", "options": {} if num_mel_bins is None
                                       else {"num_mel_bins": num_mel_bins}})
        if num_mel_bins is not None and spec["options"]["num_mel_bins"] != num_mel_bins:
            raise ValueError(f"data.num_mel_bins={num_mel_bins} but data.frontend has "
                             f"{spec['options']['num_mel_bins']} mel bins: set data.num_mel_bins=null")
        self.layout = CorpusLayout(root, work_dir)
        self.root, self.work_dir = self.layout.root, self.layout.work_dir
        self.corpus = corpus
        self.train_splits = list(train_splits)
        self.valid_splits = list(valid_splits)
        self.test_splits = list(test_splits)
        self._tokenizer = tokenizer
        self.tokenizer_path = None if tokenizer is not None else Path(
            tokenizer_path or self.layout.tokenizer(tokenizer_type, vocab_size))
        self._spec = spec
        self.stats_path = Path(stats_path or self.layout.stats) if frontend_needs_stats(spec) else None
        self.plan = CorpusPlan(
            self.layout, corpus, tuple(train_splits), tuple(valid_splits), tuple(test_splits),
            tokenizer_path=self.tokenizer_path, vocab_size=vocab_size, tokenizer_type=tokenizer_type,
            stats_path=self.stats_path, stats_features=dict(spec["options"]) if spec["kind"] == "logmel" else {},
            stats_max_utterances=stats_max_utterances, seed=seed, mini_corpus=dict(mini_corpus or {}))
        self.max_duration = max_duration
        self.max_utterance_duration = max_utterance_duration
        self.quadratic_duration = quadratic_duration
        self.num_buckets = num_buckets
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers and num_workers > 0
        self.speed_perturb = list(speed_perturb) if speed_perturb else None
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.prepare_num_workers = prepare_num_workers
        self.prepare_timeout_s = float(prepare_timeout_s)
        self.normalization_counts: dict[str, NormalizationCounts] = {}
        self._entries: dict[Path, list[ManifestEntry]] = {}
        self._train_entries: list[ManifestEntry] | None = None

    # ---- what the model needs before it is built -------------------------------------------------------
    @property
    def feature_dim(self) -> int:
        """F, the size of the last feature axis."""
        return frontend_feature_dim(self._spec)

    @property
    def tokenizer(self) -> Tokenizer:
        """The given tokenizer, or the trained one (loaded on first use)."""
        if self._tokenizer is None:
            self._require([self.tokenizer_path])
            self._tokenizer = Tokenizer(self.tokenizer_path)
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        """Output size of the model: the tokenizer's vocabulary including the blank (id 0)."""
        return self.tokenizer.vocab_size

    @property
    def frontend_spec(self) -> dict[str, Any]:
        """The complete front-end spec (with the statistics of a "logmel" front end): plain data that
        `build_frontend` turns into the module computing this data's features."""
        if frontend_needs_stats(self._spec):
            self._require([self.stats_path])
            stats = FeatureStats.load(self.stats_path)
            if stats.mean.numel() != self.feature_dim:
                raise ValueError(f"{self.stats_path}: {stats.mean.numel()} dims, features have {self.feature_dim}")
            self._spec = with_stats(self._spec, stats)
        return self._spec

    @property
    def frontend(self) -> nn.Module:
        """The front end in evaluation mode (no dither), e.g. for its `hop_length` and `sample_rate`."""
        return build_frontend(self.frontend_spec).eval()

    # ---- preparation (the pipeline's) and what is missing ----------------------------------------------
    def split_manifest(self, split: str) -> Path:
        """Manifest path of a split name."""
        return self.layout.manifest(split)

    @property
    def test_manifests(self) -> dict[str, Path]:
        """{split name: manifest path} for `test_splits`, for decoding each set separately."""
        return {split: self.split_manifest(split) for split in self.test_splits}

    @property
    def preparation_failure(self) -> Path:
        """Where rank 0 records a failed preparation (read by the ranks waiting for it)."""
        return self.layout.preparation_failure

    def prepare_data(self) -> None:
        """Runs the preparation pipeline, `prepare_corpus(self.plan)`: makes what is missing and reuses what
        exists (the mini corpus, manifests, tokenizer, statistics). Nothing is written under `root`."""
        prepare_corpus(self.plan, num_workers=self.prepare_num_workers)

    def missing_prepared(self) -> list[Path]:
        """The files `prepare_data()` would write that do not exist yet (manifests, tokenizer, stats)."""
        return self.plan.missing()

    def _require(self, paths: Sequence[Path | None]) -> None:
        missing = [path for path in paths if path is not None and not path.exists()]
        if missing:
            listed = "\n  ".join(map(str, missing))
            raise FileNotFoundError(
                f"prepared data missing:\n  {listed}\nmake it with\n  {self.plan.command()}\n(add this run's other "
                "data overrides; or recipes/librispeech/run.sh --stop-stage 2, or call prepare_data())")

    def setup(self, stage: str | None = None) -> None:
        """Reads what was prepared (never writes): the tokenizer, the front end's statistics and, for
        fitting, the training and validation manifests, whose audio files are checked once here (missing
        or empty files are listed) and whose transcripts are normalised by the tokenizer (what that
        changed is logged per split and kept in `normalization_counts`)."""
        fit = stage in (None, "fit", "validate")
        manifests = [self.split_manifest(s) for s in self.train_splits + self.valid_splits] if fit else []
        self._require([self.tokenizer_path if self._tokenizer is None else None, self.stats_path, *manifests])
        self.tokenizer  # noqa: B018 - loads it
        self.frontend_spec  # noqa: B018 - loads the statistics
        if fit and self._train_entries is None:
            train = [entry for split in self.train_splits for entry in self._read(self.split_manifest(split), split)]
            self._train_entries = self._filter_long(train)
            for split in self.valid_splits:
                self._read(self.split_manifest(split), split)

    def _read(self, path: Path, name: str) -> list[ManifestEntry]:
        """A manifest's entries with their text normalised by the tokenizer, read and checked once."""
        if path not in self._entries:
            entries = read_manifest(path)
            problems = audio_problems(entries)
            if problems:
                shown = "\n  ".join(f"{entry.path}: {problem}" for entry, problem in problems[:SHOWN_PROBLEMS])
                more = f"\n  ... and {len(problems) - SHOWN_PROBLEMS} more" if len(problems) > SHOWN_PROBLEMS else ""
                raise FileNotFoundError(
                    f"{path}: {len(problems)} of {len(entries)} audio file(s) missing or empty:\n  {shown}{more}\n"
                    "restore them, or rebuild the manifest from the corpus as it is now (prepare with --overwrite)")
            texts, counts = self.tokenizer.normalizer.normalize_all(entry.text for entry in entries)
            empty = [entry.id for entry, text in zip(entries, texts) if not text]
            if empty:
                raise ValueError(f"{path}: {len(empty)} transcript(s) have no character the tokenizer can spell "
                                 f"({self.tokenizer.describe()}), e.g. {empty[:SHOWN_PROBLEMS]}")
            if counts.changed:
                log.warning("%s: %s", name, counts.describe())
            self.normalization_counts[name] = counts
            self._entries[path] = [replace(entry, text=text) for entry, text in zip(entries, texts)]
        return self._entries[path]

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
        # a front end of its own per loader, in the loader's mode: a NeMo front end dithers in training only
        dataset = ManifestDataset(entries, self.tokenizer, build_frontend(self.frontend_spec).train(train),
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
        self._require([self.split_manifest(split) for split in self.valid_splits])
        entries = [e for split in self.valid_splits for e in self._read(self.split_manifest(split), split)]
        return self._loader(entries, train=False)

    def eval_dataloader(self, manifest: str | os.PathLike) -> DataLoader:
        """Sorted batches of one manifest: a path, or a split name (e.g. "test-clean")."""
        path = Path(manifest)
        name = path.stem
        if not path.suffix and not path.exists():
            path, name = self.split_manifest(str(manifest)), str(manifest)
        self._require([path])
        return self._loader(self._read(path, name), train=False)

    def test_dataloader(self) -> list[DataLoader]:
        """One sorted loader per `test_splits` entry, in that order."""
        return [self.eval_dataloader(path) for path in self.test_manifests.values()]
