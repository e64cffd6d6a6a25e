"""md5 checks and archive handling of the optional LibriSpeech download (no network is used)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import urllib.error

import pytest

from asr_plugin.data import LIBRISPEECH_MD5, check_md5, download_librispeech, md5sum
from asr_plugin.data.sources import download


def _make_archive(path, split="dev-clean"):
    """A .tar.gz laid out like OpenSLR's (LibriSpeech/<split>/..., LibriSpeech/README.TXT) plus a stray member."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (
            (f"LibriSpeech/{split}/1/2/1-2.trans.txt", b"1-2-0000 HI\n"),
            ("LibriSpeech/README.TXT", b"readme"),
            ("elsewhere.txt", b"stray"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_md5sum_matches_hashlib(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 5000)
    assert md5sum(path, block_size=1000) == hashlib.md5(path.read_bytes()).hexdigest()
    check_md5(path, hashlib.md5(path.read_bytes()).hexdigest().upper())
    with pytest.raises(ValueError, match="blob.bin: md5 .* does not match"):
        check_md5(path, "0" * 32)


def test_known_archives_have_md5s():
    assert set(LIBRISPEECH_MD5) == {
        "train-clean-100",
        "train-clean-360",
        "train-other-500",
        "dev-clean",
        "dev-other",
        "test-clean",
        "test-other",
    }
    assert LIBRISPEECH_MD5["dev-clean"] == "42e2234ba48799c1f50f24a7926300a1"


def test_local_archive_is_checked_and_extracted(tmp_path, monkeypatch):
    root = tmp_path / "LibriSpeech"
    archive = _make_archive(tmp_path / "archives" / "dev-clean.tar.gz")
    monkeypatch.setitem(download.LIBRISPEECH_MD5, "dev-clean", md5sum(archive))
    monkeypatch.setattr(download, "_fetch", lambda *a: pytest.fail("must not download an existing archive"))
    assert download_librispeech(root, ["dev-clean"], archive_dir=tmp_path / "archives") == ["dev-clean"]
    assert (root / "dev-clean" / "1" / "2" / "1-2.trans.txt").read_text() == "1-2-0000 HI\n"
    assert (root / "README.TXT").read_text() == "readme"
    assert not (root / "elsewhere.txt").exists() and not (tmp_path / "elsewhere.txt").exists()


def test_wrong_md5_raises_and_keeps_archive(tmp_path):
    archive = _make_archive(tmp_path / "a" / "test-clean.tar.gz", "test-clean")
    with pytest.raises(ValueError, match="test-clean.tar.gz: md5"):
        download_librispeech(tmp_path / "LS", ["test-clean"], archive_dir=tmp_path / "a")
    assert archive.exists() and not (tmp_path / "LS" / "test-clean").exists()


def test_no_network_skips_with_message(tmp_path, monkeypatch, capsys):
    def offline(url, dest, timeout):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(download, "_fetch", offline)
    assert download_librispeech(tmp_path / "LS", ["dev-other"]) == []
    assert "download skipped, no network" in capsys.readouterr().out


def test_present_split_and_unknown_split(tmp_path):
    (tmp_path / "LS" / "dev-clean").mkdir(parents=True)
    assert download_librispeech(tmp_path / "LS", ["dev-clean"]) == ["dev-clean"]
    with pytest.raises(ValueError, match="unknown LibriSpeech split 'train-clean-5'"):
        download_librispeech(tmp_path / "LS", ["train-clean-5"])
