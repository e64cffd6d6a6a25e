"""Optional download of the official OpenSLR (resource 12) LibriSpeech archives with md5 checks.

Without a network the download is skipped with a message; nothing already on disk is deleted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

OPENSLR_URL = "https://www.openslr.org/resources/12"
# From OpenSLR's md5sum.txt for resource 12.
LIBRISPEECH_MD5 = {
    "train-clean-100": "2a93770f6d5c6c964bc36631d331a522",
    "train-clean-360": "c0e676e450a7ff2f54aeade5171606fa",
    "train-other-500": "d1a0fd59409feb2c614ce4d30c387708",
    "dev-clean": "42e2234ba48799c1f50f24a7926300a1",
    "dev-other": "c8d0bcc9cca99d4f8b62fcc847357931",
    "test-clean": "32fa31d27d2e1cad72775fee3f4849a9",
    "test-other": "fb5a50374b501bb3bac4815ee91d3135",
}
# Members of the archives start with this folder, which becomes ROOT.
ARCHIVE_TOP = "LibriSpeech/"


def md5sum(path: str | os.PathLike, block_size: int = 1 << 20) -> str:
    """Hex md5 digest of a file, read in blocks."""
    digest = hashlib.md5()  # a checksum published by OpenSLR, not a security measure
    with open(path, "rb") as handle:
        while block := handle.read(block_size):
            digest.update(block)
    return digest.hexdigest()


def check_md5(path: str | os.PathLike, expected: str) -> None:
    """Raises ValueError naming the file when its md5 is not `expected`."""
    actual = md5sum(path)
    if actual != expected.lower():
        raise ValueError(
            f"{path}: md5 {actual} does not match the expected {expected}; "
            "the archive is corrupt or incomplete (delete it to download again)"
        )


def _fetch(url: str, dest: Path, timeout: float) -> None:
    part = dest.with_name(dest.name + ".part")
    with urllib.request.urlopen(url, timeout=timeout) as response, part.open("wb") as out:
        shutil.copyfileobj(response, out, length=1 << 20)
    os.replace(part, dest)


def _extract(archive: Path, root: Path) -> None:
    """Extracts LibriSpeech/<split>/... from `archive` into root/<split>/... (tarfile's safe 'data' filter)."""

    def strip_top(member: tarfile.TarInfo, dest_path: str) -> tarfile.TarInfo | None:
        if not member.name.startswith(ARCHIVE_TOP):
            return None  # outside the corpus folder
        member = member.replace(name=member.name[len(ARCHIVE_TOP) :], deep=False)
        return tarfile.data_filter(member, dest_path)

    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(root, filter=strip_top)


def download_librispeech(
    root: str | os.PathLike, splits: list[str], archive_dir: str | os.PathLike | None = None, timeout: float = 30.0
) -> list[str]:
    """Downloads, checks and extracts the archives of `splits` missing under `root`.

    Splits whose directory already exists are left alone; an archive already in `archive_dir` (default
    root/archives) is checked and reused. Returns the splits now present. Network errors print a message
    and skip that split instead of raising; a wrong md5 raises ValueError.
    """
    root = Path(root)
    archive_dir = Path(archive_dir) if archive_dir is not None else root / "archives"
    present = []
    for split in splits:
        if split not in LIBRISPEECH_MD5:
            raise ValueError(f"unknown LibriSpeech split {split!r}; known: {sorted(LIBRISPEECH_MD5)}")
        if (root / split).is_dir():
            print(f"{split}: already present in {root}, not downloading")
            present.append(split)
            continue
        archive = archive_dir / f"{split}.tar.gz"
        if not archive.exists():
            url = f"{OPENSLR_URL}/{split}.tar.gz"
            archive_dir.mkdir(parents=True, exist_ok=True)
            print(f"{split}: downloading {url}")
            try:
                _fetch(url, archive, timeout)
            except (urllib.error.URLError, OSError) as err:
                print(f"{split}: download skipped, no network access to {url} ({err})")
                continue
        check_md5(archive, LIBRISPEECH_MD5[split])
        print(f"{split}: md5 ok, extracting {archive} into {root}")
        _extract(archive, root)
        present.append(split)
    return present
