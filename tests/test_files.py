"""Atomic writes: the old file survives a failing writer, nothing partial is left, the data and the rename
are fsynced (file and directory), and new files get the usual permissions."""

from __future__ import annotations

import os
import stat

import pytest

from asr_plugin import files as files_module
from asr_plugin.files import write_atomic, write_bytes_atomic, write_text_atomic


def _names(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failing_writer_leaves_the_old_file_and_no_partial(tmp_path, error):
    path = write_text_atomic(tmp_path / "manifest.jsonl", "old content\n")

    def half_then_fail(tmp):
        tmp.write_text("half of the new")
        raise error

    with pytest.raises(type(error)):
        write_atomic(path, half_then_fail)
    assert path.read_text() == "old content\n" and _names(tmp_path) == ["manifest.jsonl"]


def test_a_failing_first_write_leaves_nothing(tmp_path):
    with pytest.raises(ValueError):
        write_atomic(tmp_path / "sub" / "stats.json", lambda tmp: (_ for _ in ()).throw(ValueError("bad")))
    assert _names(tmp_path / "sub") == []


def test_the_file_and_then_its_directory_are_fsynced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        info = os.fstat(fd)
        synced.append(("dir" if stat.S_ISDIR(info.st_mode) else "file", info.st_ino, info.st_size))
        real_fsync(fd)

    monkeypatch.setattr(files_module.os, "fsync", recording_fsync)
    path = write_bytes_atomic(tmp_path / "tokenizer.model", b"x" * 1000)
    # the temporary file (now renamed: same inode) with all its bytes, then the directory after the rename
    assert synced == [("file", path.stat().st_ino, 1000), ("dir", tmp_path.stat().st_ino, synced[1][2])]


def test_the_suffix_is_kept_and_permissions_follow_the_umask(tmp_path):
    seen = []
    write_atomic(tmp_path / "audio.flac", lambda tmp: (seen.append(tmp), tmp.write_bytes(b"f")))
    assert seen[0].name.startswith(".audio.flac.") and seen[0].suffix == ".flac"
    assert seen[0].parent == tmp_path  # same directory: the rename never crosses file systems
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "audio.flac").stat().st_mode) == 0o666 & ~umask


def test_replacing_keeps_readers_of_the_old_file_whole(tmp_path):
    path = write_text_atomic(tmp_path / "a.txt", "first")
    with path.open() as reader:
        write_text_atomic(path, "second, longer")
        assert reader.read() == "first"  # the old inode, untouched
    assert path.read_text() == "second, longer"
