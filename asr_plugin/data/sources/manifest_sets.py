"""What manifest-based sources share: training, validation and test sets given as lists of files (and the
test sets by name), each set one split of the project's manifests ("train", "valid", the test names)."""

from __future__ import annotations

import hashlib
import os
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path

from asr_plugin.data.sources.base import DataSource, list_override, mapping_override
from asr_plugin.data.sources.candidate import Candidate, Skipped

TRAIN_SPLIT, VALID_SPLIT = "train", "valid"


def as_paths(value: str | os.PathLike | Sequence[str | os.PathLike] | None, key: str) -> tuple[Path, ...]:
    """One path or a list of them, as absolute paths; ValueError naming `key` for anything else."""
    if value is None:
        return ()
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(item, (str, os.PathLike)) for item in value):
        raise ValueError(f"data.{key} must be a path or a list of paths, got {value!r}")
    return tuple(Path(item).absolute() for item in value)


def named_sets(
    value: Mapping[str, str | os.PathLike] | Sequence[str | os.PathLike] | str | None, key: str
) -> dict[str, tuple[Path, ...]]:
    """Test sets: {name: path or list of paths}, or a list of paths named by their file stems (".jsonl.gz"
    and ".json" both stripped). ValueError naming `key` for a duplicate or reserved name."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        sets = {str(name): as_paths(paths, f"{key}.{name}") for name, paths in value.items()}
    else:
        paths = as_paths(value, key)
        sets = {}
        for path in paths:
            name = path.name.split(".")[0]
            if name in sets:
                raise ValueError(f"data.{key}: two files named {name}; give the sets names ({{name: path}})")
            sets[name] = (path,)
    reserved = [name for name in sets if name in (TRAIN_SPLIT, VALID_SPLIT)]
    if reserved:
        raise ValueError(f"data.{key}: the names {reserved} are the training and validation sets' own; rename them")
    return sets


def check_files(sets: Mapping[str, Sequence[Path]], what: str) -> None:
    """FileNotFoundError listing every missing file, with the data key it came from."""
    missing = [f"{key}: {path}" for key, paths in sets.items() for path in paths if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"{what} not found:\n  " + "\n  ".join(missing))


def fingerprint(path: Path) -> str:
    """The file's path with its size and content hash: a manifest edited after preparation has another one."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"{path} ({path.stat().st_size} bytes, sha256 {digest.hexdigest()})"


def utterance_id(stem: str, line: int, index: int, count: int) -> str:
    """An id unique within a split of `count` files: "<stem>-<line>", "<index>.<stem>-<line>" with several."""
    return f"{stem}-{line:06d}" if count == 1 else f"{index}.{stem}-{line:06d}"


class ManifestSetSource(DataSource):
    """A source whose sets are lists of manifest files: the keys `train_<suffix>`, `valid_<suffix>` (one
    split each, "train" and "valid") and `test_<suffix>` (named test sets). Subclasses say how one file is
    read (`read`).

    Args:
        train, valid: a file or a list of them (either may be empty: evaluation needs only test sets).
        test: {name: file or list of files}, or a list of files named by their stems.
    """

    suffix = ""  # "manifests", "cuts": the keys' ending
    what = ""  # e.g. "NeMo manifest", for messages

    def __init__(
        self,
        train: str | Sequence[str] | None,
        valid: str | Sequence[str] | None,
        test: Mapping[str, str] | Sequence[str] | None,
    ):
        self.sets = {
            TRAIN_SPLIT: as_paths(train, f"train_{self.suffix}"),
            VALID_SPLIT: as_paths(valid, f"valid_{self.suffix}"),
            **named_sets(test, f"test_{self.suffix}"),
        }
        check_files({self._key(name): paths for name, paths in self.sets.items()}, f"{self.what}(s)")
        self.train_splits = (TRAIN_SPLIT,) if self.sets[TRAIN_SPLIT] else ()
        self.valid_splits = (VALID_SPLIT,) if self.sets[VALID_SPLIT] else ()
        self.test_splits = tuple(name for name in self.sets if name not in (TRAIN_SPLIT, VALID_SPLIT))

    def _key(self, split: str) -> str:
        """The data config key a split's files come from, e.g. "data.test_manifests.other"."""
        return (
            f"data.{split}_{self.suffix}" if split in (TRAIN_SPLIT, VALID_SPLIT) else f"data.test_{self.suffix}.{split}"
        )

    @abstractmethod
    def read(self, path: Path, index: int, count: int) -> tuple[list[Candidate], list[Skipped]]:
        """The candidates of file `index` of the `count` files of a split (ids unique within the split,
        `utterance_id`), and its unusable lines."""

    def scan(self, split: str) -> tuple[list[Candidate], list[Skipped]]:
        if split not in self.sets:
            raise ValueError(f"split {split!r}: this {self.what} source has the splits {list(self.sets)}")
        files = self.sets[split]
        candidates: list[Candidate] = []
        skipped: list[Skipped] = []
        for index, path in enumerate(files):
            found, left_out = self.read(path, index, len(files))
            candidates += found
            skipped += left_out
        return without_duplicates(candidates, skipped)

    def origin(self, split: str) -> list[str]:
        # with each file's content: a prepared split whose manifests were edited since is not reused
        return [fingerprint(path) for path in self.sets[split]]

    def overrides(self) -> list[str]:
        tests = {name: paths for name, paths in self.sets.items() if name not in (TRAIN_SPLIT, VALID_SPLIT)}
        return [
            list_override(f"train_{self.suffix}", self.sets[TRAIN_SPLIT]),
            list_override(f"valid_{self.suffix}", self.sets[VALID_SPLIT]),
            mapping_override(f"test_{self.suffix}", tests),
        ]


def without_duplicates(candidates: list[Candidate], skipped: list[Skipped]) -> tuple[list[Candidate], list[Skipped]]:
    """`candidates` with the later ones of a duplicate id (two cuts of one id) or of one audio segment (a NeMo
    line given twice) left out, listed in `skipped` naming the first: a test set would score them twice, a
    training set train on them twice."""
    first: dict[object, Candidate] = {}
    kept = []
    for candidate in candidates:
        keys = (("id", candidate.id), ("segment", candidate.path, candidate.offset, candidate.duration))
        earlier = next((first[key] for key in keys if key in first), None)
        if earlier is not None:
            what = f"utterance id {candidate.id!r}" if earlier.id == candidate.id else "the audio segment"
            skipped.append(
                Skipped(candidate.where or candidate.path, f"{what} of {earlier.where or earlier.path} again")
            )
            continue
        first.update(dict.fromkeys(keys, candidate))
        kept.append(candidate)
    return kept, skipped
