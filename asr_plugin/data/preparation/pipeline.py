"""The one data preparation pipeline: `prepare_corpus(plan, steps)`.

`recipes/librispeech/run.sh` stages 0-2 run it step by step through ``scripts/prepare_data.py``; a training
job's rank 0 runs all of it through ``TransducerDataModule.prepare_data()``. Steps:

* ``manifests``: (the source makes its corpus first: the mini corpus is generated, LibriSpeech downloaded
  when asked) one manifest per split of the data source (`asr_plugin.data.sources`), audio headers and
  segments checked, what cannot be used listed in a skip list.
* ``tokenizer``: a SentencePiece model trained on the training transcripts (none when the data config
  brings its own tokenizer, e.g. a NeMo checkpoint's).
* ``stats``: global mean/std of the log-mel features over (a sample of) the training utterances (none when
  the front end needs none, e.g. NeMo's per-utterance normalisation).

Each step reuses what exists unless `overwrite`, writes every file atomically, and writes nothing under the
corpus directory (only the mini corpus generation and an asked-for download create the corpus itself). A run
that writes holds the work directory's lock (`asr_plugin.data.preparation.work_lock`): a second run waits, then reuses.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asr_plugin.data.preparation.feature_stats import compute_feature_stats
from asr_plugin.data.preparation.layout import CorpusLayout
from asr_plugin.data.preparation.prepare import prepare_split
from asr_plugin.data.preparation.work_lock import preparation_lock
from asr_plugin.data.sources import SOURCES, DataSource
from asr_plugin.data.sources.manifest import ManifestEntry, read_manifest
from asr_plugin.files import remove_stale_temporaries, write_text_atomic
from asr_plugin.frontend.logmel import LogMelFeatures
from asr_plugin.text.tokenizer import train_tokenizer

log = logging.getLogger(__name__)

CORPORA = tuple(SOURCES)
PREPARE_STEPS = ("manifests", "tokenizer", "stats")


@dataclass(frozen=True)
class CorpusPlan:
    """What preparation makes for one data configuration, and where.

    Args:
        layout: the work directory (every path written comes from it) and the corpus directory, if any.
        source: where the utterances of each split come from, and the split names.
        tokenizer_path: the SentencePiece model to train; None when the configuration brings a tokenizer.
        vocab_size, tokenizer_type: of the tokenizer to train.
        stats_path: the feature statistics to compute; None when the front end needs none.
        stats_features: `LogMelFeatures` keyword arguments of the features the statistics are taken over.
        stats_max_utterances: a random sample of this many training utterances (None = all of them).
        seed: of that sample.
    """

    layout: CorpusLayout
    source: DataSource
    tokenizer_path: Path | None = None
    vocab_size: int = 500
    tokenizer_type: str = "bpe"
    stats_path: Path | None = None
    stats_features: dict[str, Any] = field(default_factory=dict)
    stats_max_utterances: int | None = None
    seed: int = 0

    @property
    def corpus(self) -> str:
        """The data config's `corpus` (the source's name)."""
        return self.source.name

    @property
    def train_splits(self) -> tuple[str, ...]:
        return self.source.train_splits

    @property
    def splits(self) -> list[str]:
        """Every split, training splits first, each once."""
        return self.source.splits

    def outputs(self, steps: Sequence[str] = PREPARE_STEPS) -> list[Path]:
        """The files `steps` make (skip lists aside: they exist only when files were left out)."""
        check_steps(steps)
        paths = [self.layout.manifest(split) for split in self.splits] if "manifests" in steps else []
        paths += [
            path
            for step, path in (("tokenizer", self.tokenizer_path), ("stats", self.stats_path))
            if step in steps and path is not None
        ]
        return paths

    def missing(self, steps: Sequence[str] = PREPARE_STEPS) -> list[Path]:
        """The files of `outputs(steps)` that do not exist (yet)."""
        return [path for path in self.outputs(steps) if not path.exists()]

    def command(self) -> str:
        """The shell command that makes this plan's files: `scripts/prepare_data.py` with the data config's
        values that decide them (add any other data overrides of the run)."""
        overrides = [f"data={self.corpus}", *self.source.overrides(), f"data.work_dir={self.layout.work_dir}"]
        if self.tokenizer_path is not None:
            overrides += [f"data.vocab_size={self.vocab_size}", f"data.tokenizer_type={self.tokenizer_type}"]
        if self.stats_path is not None:  # a log-mel front end with global statistics: not the configs' default
            overrides += ["data.frontend=null", f"data.num_mel_bins={self.stats_features.get('num_mel_bins', 80)}"]
        return shlex.join(["python", "scripts/prepare_data.py", *overrides])

    def read_training_entries(self) -> list[ManifestEntry]:
        """Every entry of the training splits' manifests (made by the manifests step)."""
        if not self.train_splits:
            raise ValueError(
                f"{self.source!r} has no training set: the tokenizer and the feature statistics are "
                "made from one (or give data.tokenizer and a front end that needs no statistics)"
            )
        manifests = [self.layout.manifest(split) for split in self.train_splits]
        missing = [path for path in manifests if not path.exists()]
        if missing:
            raise FileNotFoundError(
                f"training manifest(s) {', '.join(map(str, missing))} do not exist: run the "
                f"manifests step first ({self.command()} --steps manifests)"
            )
        return [entry for path in manifests for entry in read_manifest(path)]


def check_steps(steps: Sequence[str]) -> None:
    """ValueError naming a step that is not one of `PREPARE_STEPS`."""
    unknown = [step for step in steps if step not in PREPARE_STEPS]
    if unknown:
        raise ValueError(f"unknown preparation step(s) {unknown}; the steps are {list(PREPARE_STEPS)}")


def _writable_work_dir(layout: CorpusLayout) -> None:
    try:
        layout.work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(
            f"cannot create the work directory {layout.work_dir} ({err.strerror}): set data."
            "work_dir to a writable directory (a shared file system for multi-node jobs)"
        ) from None
    if not os.access(layout.work_dir, os.W_OK):
        raise PermissionError(
            f"the work directory {layout.work_dir} is not writable: set data.work_dir to a "
            "writable directory (a shared file system for multi-node jobs)"
        )


def prepare_corpus(
    plan: CorpusPlan,
    steps: Sequence[str] = PREPARE_STEPS,
    *,
    num_workers: int = 1,
    download: bool = False,
    strict: bool = False,
    overwrite: bool = False,
    full_check: bool = False,
    progress: bool = True,
) -> list[Path]:
    """Runs `steps` of `plan` in order (see the module docstring) and returns the files it wrote.

    Args:
        num_workers: processes checking audio headers and computing statistics (1: this process only).
        download: let the source fetch its corpus first (LibriSpeech: the missing splits from OpenSLR).
        strict: refuse (ValueError naming every file) instead of leaving unusable files out of a manifest.
        overwrite: rebuild what exists.
        full_check: decode every audio file, not only its header (finds truncated files; slow).
    """
    check_steps(steps)
    writes = overwrite or bool(plan.missing(steps))
    if writes:  # prepared data on a read-only file system is only read
        _writable_work_dir(plan.layout)
    with preparation_lock(plan.layout.work_dir) if writes else contextlib.nullcontext():
        # under the lock: what another run made meanwhile is reused, and temporaries of killed writers are stale
        before = {path: path.exists() for path in plan.outputs(steps)}
        if writes:
            remove_stale_temporaries(plan.layout.work_dir)
            if plan.corpus == "mini":  # the corpus this preparation writes (a LibriSpeech corpus is only read)
                remove_stale_temporaries(plan.layout.root)
        if "manifests" in steps:
            plan.source.make(download)
            for split in plan.splits:
                check_origin(plan, split, overwrite)
                prepare_split(
                    plan.layout,
                    split,
                    source=plan.source,
                    num_workers=num_workers,
                    strict=strict,
                    overwrite=overwrite,
                    full_check=full_check,
                    progress=progress,
                )
                record_origin(plan, split)
        if "tokenizer" in steps and _to_make(
            plan.tokenizer_path, "tokenizer", overwrite, "the data config brings its own (data.tokenizer)"
        ):
            texts = [entry.text for entry in plan.read_training_entries()]
            print(f"tokenizer: training a {plan.vocab_size}-id {plan.tokenizer_type} model on {len(texts)} transcripts")
            tokenizer = train_tokenizer(
                texts,
                plan.tokenizer_path,
                plan.vocab_size,
                plan.tokenizer_type,
                overwrite=overwrite,
                vocab_key="data.vocab_size",
            )
            print(f"tokenizer: wrote {plan.tokenizer_path} ({tokenizer.vocab_size} ids, blank id {tokenizer.blank_id})")
        if "stats" in steps and _to_make(
            plan.stats_path, "feature stats", overwrite, "the front end needs none (data.frontend)"
        ):
            stats = compute_feature_stats(
                plan.read_training_entries(),
                LogMelFeatures(**plan.stats_features),
                plan.stats_max_utterances,
                num_workers=num_workers if num_workers > 1 else 0,
                seed=plan.seed,
                progress=progress,
            )
            stats.save(plan.stats_path)
            print(f"feature stats: wrote {plan.stats_path} from {stats.num_frames} frames")
    return [path for path, existed in before.items() if path.exists() and (overwrite or not existed)]


def check_origin(plan: CorpusPlan, split: str, overwrite: bool) -> None:
    """Refuses to reuse a split's manifest made from other files (e.g. data.train_manifests changed but
    data.work_dir did not), which would silently train on the old data."""
    path = plan.layout.origin(split)
    if overwrite or not path.exists() or not plan.layout.manifest(split).exists():
        return
    recorded = json.loads(path.read_text(encoding="utf-8"))
    if recorded != plan.source.origin(split):
        raise ValueError(
            f"{plan.layout.manifest(split)} was made from {recorded}, but this data config reads the "
            f"split {split!r} from {plan.source.origin(split)}: set data.work_dir to another "
            "directory, or rebuild it (scripts/prepare_data.py ... --overwrite)"
        )


def record_origin(plan: CorpusPlan, split: str) -> None:
    """Writes what the split's manifest was made from (once; a manifest made before this existed gets it)."""
    path = plan.layout.origin(split)
    if not path.exists() or json.loads(path.read_text(encoding="utf-8")) != plan.source.origin(split):
        write_text_atomic(path, json.dumps(plan.source.origin(split)))


def _to_make(path: Path | None, what: str, overwrite: bool, why_none: str) -> bool:
    """Whether a step has a file to write; says why not."""
    if path is None:
        print(f"{what}: {why_none}, nothing to make")
        return False
    if path.exists() and not overwrite:
        print(f"{what}: reusing {path} (pass --overwrite to rebuild)")
        return False
    return True


def record_preparation_failure(path: Path, job: str, error: BaseException) -> None:
    """Writes what made rank 0's preparation of job `job` fail to `path` (best effort: a work directory
    that cannot be written is often the failure itself), so that the ranks waiting for it stop waiting."""
    try:
        write_text_atomic(path, json.dumps({"job": job, "error": f"{type(error).__name__}: {error}"}))
    except OSError as err:
        log.warning(
            "could not record the preparation failure in %s (%s): the other ranks wait until data.prepare_timeout_s",
            path,
            err,
        )


def preparation_failure_of(path: Path, job: str) -> str | None:
    """The error rank 0 recorded at `path` for job `job`, or None (no record, or another job's)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return str(record.get("error")) if isinstance(record, dict) and record.get("job") == job else None


def clear_preparation_failure(path: Path) -> None:
    """Removes an earlier job's failure record (if the work directory allows)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
