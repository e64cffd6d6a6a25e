"""LibriSpeech-layout corpora as data sources: LibriSpeech itself and the generated mini corpus."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from asr_plugin.data.demo.corpus import make_mini_librispeech
from asr_plugin.data.sources.base import DataSource, list_override
from asr_plugin.data.sources.candidate import Candidate, Skipped
from asr_plugin.data.sources.download import download_librispeech
from asr_plugin.data.sources.librispeech_reader import scan_split


class LibriSpeechSource(DataSource):
    """ROOT/<split>/<speaker>/<chapter>/*.flac with trans.txt files (`asr_plugin.data.sources.librispeech_reader`).

    Args:
        root: the corpus directory, one folder per split (only read; downloaded into when asked).
        train_splits, valid_splits, test_splits: split folder names under `root`.
    """

    name = "librispeech"

    def __init__(
        self,
        root: str | os.PathLike,
        train_splits: Sequence[str] = ("train-clean-100", "train-clean-360", "train-other-500"),
        valid_splits: Sequence[str] = ("dev-clean",),
        test_splits: Sequence[str] = ("dev-clean", "dev-other", "test-clean", "test-other"),
    ):
        self.root = Path(root).absolute()
        self.train_splits, self.valid_splits, self.test_splits = (
            tuple(train_splits),
            tuple(valid_splits),
            tuple(test_splits),
        )

    def make(self, download: bool = False) -> None:
        if download:
            download_librispeech(self.root, self.splits)

    def scan(self, split: str) -> tuple[list[Candidate], list[Skipped]]:
        return scan_split(self.root, split)

    def origin(self, split: str) -> list[str]:
        return [str(self.root / split)]

    def overrides(self) -> list[str]:
        return [
            f"data.root={self.root}",
            *(list_override(key, getattr(self, key)) for key in ("train_splits", "valid_splits", "test_splits")),
        ]


class MiniCorpusSource(LibriSpeechSource):
    """The synthesized mini corpus (`make_mini_librispeech`), generated under `root` when missing.

    Args:
        mini_corpus: keyword arguments of `make_mini_librispeech` (n_train, n_dev, n_test, seed).
    """

    name = "mini"

    def __init__(
        self,
        root: str | os.PathLike,
        train_splits: Sequence[str] = ("train",),
        valid_splits: Sequence[str] = ("dev",),
        test_splits: Sequence[str] = ("dev", "test"),
        mini_corpus: Mapping[str, Any] | None = None,
    ):
        super().__init__(root, train_splits, valid_splits, test_splits)
        self.mini_corpus = dict(mini_corpus or {})

    def make(self, download: bool = False) -> None:
        make_mini_librispeech(self.root, **self.mini_corpus)
