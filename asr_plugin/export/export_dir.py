"""Export directories that are whole: every file of one model, or not there at all.

An export is a set of files read together (sherpa-onnx's encoder, decoder, joiner and tokens; the three
``torch.export`` programs and their metadata). Replacing them one by one mixes two models whenever the new set
writes fewer files (an old ``*.int8.onnx`` left beside a new float export) or the writer is killed half-way (a
new encoder beside the old decoder, which sherpa-onnx loads when the architectures match). `export_directory`
therefore hands the exporter a fresh hidden staging directory beside the target, and when every file is written
records them in ``export_record.json`` (each file's sha256, the model's `model_sha256` and the source it was
loaded from) and swaps the staging directory in for the target: the target is then the new set and nothing of
the old one. A kill before the swap leaves the old export as it was; during the swap, at worst no directory
under the target's name (the new set is complete under its staging name). Leftovers of killed exports
(``.<name>.<random>.staging`` and ``.old``) are removed by the next export to that target; a staging directory
is locked (``flock``) while its export runs, so a slow one is never taken for a killed one. Two exports into one
new directory: the first to finish takes it, the second (without `overwrite`) fails naming it.

A set of exports (``--every-lookahead``: one directory per lookahead) is staged and swapped the same way, as one
directory whose record names each member export by its record's hash, so a kill half-way never leaves lookaheads
of two models side by side.

The directory is replaced whole, so it must hold nothing else: an existing target is replaced only with
`overwrite`, and only when all its files belong to an export (those listed in its record, or for an export made
before records, the names its exporter writes); anything else is refused by name, never deleted.
"""

from __future__ import annotations

import errno
import fcntl
import fnmatch
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

from asr_plugin.files import STALE_AFTER_S, fsync_path, write_text_atomic

RECORD_NAME = "export_record.json"
_BLOCK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def model_sha256(model: torch.nn.Module) -> str:
    """A digest of `model`'s weights and buffers (names, dtypes, shapes and values): the same for every export of
    the same model, whichever checkpoint file or format it was loaded from."""
    return tensors_sha256(model.state_dict())


def tensors_sha256(tensors: Mapping[str, torch.Tensor]) -> str:
    """A digest of named tensors: their names, dtypes, shapes and values."""
    digest = hashlib.sha256()
    for name, tensor in sorted(tensors.items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def read_record(directory: str | os.PathLike) -> dict | None:
    """The export record of `directory`, or None when it has none (or an unreadable one)."""
    try:
        record = json.loads((Path(directory) / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None


def _check_replaceable(out_dir: Path, overwrite: bool, legacy_patterns: Sequence[str]) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    record = read_record(out_dir)

    def of_an_export(path: Path) -> bool:
        if path.is_dir():  # a set's member export (one lookahead's of `--every-lookahead`)
            return read_record(path) is not None and (record is None or path.name in record["files"])
        if record is not None:
            return path.name == RECORD_NAME or path.name in record["files"]
        return any(fnmatch.fnmatch(path.name, pattern) for pattern in legacy_patterns)

    present = sorted(out_dir.iterdir())
    foreign = [path.name for path in present if not of_an_export(path)]
    if foreign:
        raise ValueError(
            f"{out_dir} holds {foreign}, which no export wrote: an export replaces its directory whole, so "
            "move them away or export into another directory"
        )
    if present and not overwrite:
        raise FileExistsError(
            f"{out_dir} holds an export ({[path.name for path in present]}); pass overwrite=True (--overwrite) "
            "to replace it"
        )


def _hold(staging: Path) -> int:
    """An open descriptor of `staging` holding its ``flock`` (released when it is closed or the process ends,
    however it ends): what tells a live export's staging directory from a killed one's."""
    fd = os.open(staging, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _is_held(directory: Path) -> bool:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _remove_stale_leftovers(out_dir: Path) -> None:
    """Staging and replaced directories of killed exports to `out_dir` (older than `STALE_AFTER_S`); a staging
    directory whose export still runs (it holds its lock: a large encoder takes minutes to write) is kept."""
    now = time.time()
    for pattern in (f".{out_dir.name}.*.staging", f".{out_dir.name}.*.old"):
        for leftover in out_dir.parent.glob(pattern):
            try:
                if leftover.is_dir() and now - leftover.stat().st_mtime > STALE_AFTER_S and not _is_held(leftover):
                    shutil.rmtree(leftover, ignore_errors=True)
            except FileNotFoundError:
                continue


def _swap_in(staging: Path, out_dir: Path, overwrite: bool) -> None:
    """Puts `staging` under `out_dir`'s name, the old directory (if any) out of the way first, then removes it.
    Without `overwrite` only an absent (or empty) `out_dir` is taken: FileExistsError naming the export that
    another process swapped in since this one started (the rename refuses a directory that holds files)."""
    old = None
    if not overwrite:
        try:
            if out_dir.is_dir():
                out_dir.rmdir()  # empty: made by the user; one that holds files is refused below
            os.rename(staging, out_dir)
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise
            record = read_record(out_dir) or {}
            raise FileExistsError(
                f"{out_dir}: another export (of {record.get('source') or 'an unnamed source'}, model sha256 "
                f"{str(record.get('model_sha256'))[:12]}) was put there while this one was written; it is kept and "
                "this one discarded: export again with --overwrite (overwrite=True) to replace it, or into another "
                "directory"
            ) from None
        fsync_path(out_dir.parent)
        return
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.old")
        os.replace(out_dir, old)
    os.replace(staging, out_dir)
    fsync_path(out_dir.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def export_directory(
    out_dir: str | os.PathLike,
    model_digest: str,
    *,
    source: str | None = None,
    overwrite: bool = False,
    legacy_patterns: Sequence[str] = (),
) -> Iterator[Path]:
    """Yields an empty staging directory to write an export's files into (their final names), or a set of exports
    (each subdirectory an `export_directory` of its own, inside the staging directory: the set is swapped as one);
    when the block ends, records them with `model_digest` (`model_sha256`) and `source` (where the model was
    loaded from, for people) and swaps the staging directory in for `out_dir` (see the module docstring; a
    symbolic link is followed: the directory it names is replaced, the link kept). An error or interruption in
    the block removes the staging directory and leaves `out_dir` untouched.

    Raises FileExistsError when `out_dir` holds files and not `overwrite`; ValueError naming the files of an
    `out_dir` that are not of an export (`legacy_patterns`: glob patterns of the files an export made before
    records holds).
    """
    # A link to the directory (exp/latest -> exp/v3) is replaced through: the export goes where it points, staged
    # beside that directory on its file system; swapping the link itself out would leave it hidden beside a new
    # real directory and the directory it named with the old model.
    out_dir = Path(out_dir).resolve()
    _check_replaceable(out_dir, overwrite, legacy_patterns)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_leftovers(out_dir)
    staging = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.staging")
    staging.mkdir()
    held = _hold(staging)
    try:
        yield staging
        entries = sorted(staging.iterdir())
        files = [path for path in entries if path.is_file()]
        members = [path for path in entries if path.is_dir()]
        unrecorded = [path.name for path in members if not (path / RECORD_NAME).is_file()]
        if unrecorded:
            raise ValueError(f"export_directory: subdirectories {unrecorded} are no exports (written whole)")
        record = {
            "model_sha256": model_digest,
            "source": source,
            # a member export by its record's hash (which holds its files' hashes)
            "files": {path.name: file_sha256(path / RECORD_NAME if path.is_dir() else path) for path in entries},
        }
        write_text_atomic(staging / RECORD_NAME, json.dumps(record, indent=1) + "\n")
        for path in files:
            fsync_path(path)
        fsync_path(staging)
        _swap_in(staging, out_dir, overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        os.close(held)
