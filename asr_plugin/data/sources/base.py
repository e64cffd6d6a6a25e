"""The data-source seam: what every corpus reader yields, and the one interface preparation uses.

A source names the splits of a data configuration (training, validation, test) and lists each split's
utterances as `Candidate`s (id, audio path, optional segment, transcript as written, optional speaker)
plus the `Skipped` lines or files it could not use, each with where it was (file, or manifest:line) and
why. Preparation (`asr_plugin.data.preparation.prepare.prepare_split`) checks every candidate's audio and writes the
project's own manifest of the split; tokenizer training, statistics, the start-of-training checks, the
data module and evaluation read only those manifests, so they never see which source made them.
"""

from __future__ import annotations

import os
import shlex
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path

from asr_plugin.data.sources.candidate import Candidate, Skipped


class DataSource(ABC):
    """One corpus format. Subclasses take their configuration keys as constructor arguments (the data
    config's keys other than the data module's own) and register in `asr_plugin.data.sources.SOURCES`.

    Attributes:
        name: the data config's `corpus` value (e.g. "nemo").
        root: a directory only ever read that must not hold the work directory, or None.
        train_splits, valid_splits, test_splits: the split names; each gets `<work_dir>/<split>.jsonl`.
        train_shar, shards: a Lhotse Shar directory the training set is streamed from and its shards
            (`asr_plugin.data.sources.shar_directory.shar_shards`), in place of training splits; None and
            none for every source but lhotse cuts given ``data.train_shar``.
    """

    name: str = ""
    root: Path | None = None
    train_splits: tuple[str, ...] = ()
    valid_splits: tuple[str, ...] = ()
    test_splits: tuple[str, ...] = ()
    train_shar: Path | None = None
    shards: Sequence[Mapping[str, Path]] = ()

    @property
    def splits(self) -> list[str]:
        """Every split, training splits first, each once."""
        return list(dict.fromkeys([*self.train_splits, *self.valid_splits, *self.test_splits]))

    def make(self, download: bool = False) -> None:  # noqa: B027 (a default, not abstract: most sources make nothing)
        """Creates or fetches the corpus itself before its splits are scanned (the mini corpus is generated,
        LibriSpeech downloaded when asked); most sources have nothing to do."""

    @abstractmethod
    def scan(self, split: str) -> tuple[list[Candidate], list[Skipped]]:
        """The utterances of `split` in a fixed order, and what was left out (never writes anything)."""

    @abstractmethod
    def origin(self, split: str) -> list[str]:
        """What `split` is read from (directories, manifest files): a work directory's manifest of the split
        is reused only for the same origin."""

    @abstractmethod
    def overrides(self) -> list[str]:
        """Hydra overrides (``data.<key>=<value>``) that recreate this source, for the commands printed in
        messages (`CorpusPlan.command`)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({' '.join(map(shlex.quote, self.overrides()))})"


def list_override(key: str, values: Sequence[str | os.PathLike]) -> str:
    """``data.<key>=[a,b]``."""
    return f"data.{key}=[{','.join(map(str, values))}]"


def mapping_override(key: str, values: Mapping[str, Sequence[str | os.PathLike]]) -> str:
    """``data.<key>={name:path,other:[path,path]}``."""
    items = (
        f"{name}:{paths[0]}" if len(paths) == 1 else f"{name}:[{','.join(map(str, paths))}]"
        for name, paths in values.items()
    )
    return "data." + key + "={" + ",".join(items) + "}"
