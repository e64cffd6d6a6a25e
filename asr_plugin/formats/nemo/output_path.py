"""Where an export goes when its command line names a directory: ``export_nemo.py run/last.ckpt out/`` writes
``out/last.nemo``, not a file called ``out``."""

from __future__ import annotations

import os
from pathlib import Path

NEMO_SUFFIX = ".nemo"


def nemo_output_path(source: str | os.PathLike, output: str | os.PathLike) -> Path:
    """`output` itself, or, when it is an existing directory or ends with a path separator, the file named
    after `source` (its stem, ``.nemo``) inside it (created if needed). ValueError when that file is `source`."""
    text = os.fspath(output)
    if not (Path(text).is_dir() or text.endswith((os.sep, "/"))):
        return Path(text)
    directory = Path(text)
    path = directory / f"{Path(source).stem}{NEMO_SUFFIX}"
    if path.resolve() == Path(source).resolve():
        raise ValueError(f"output {output}: {path} would be the source itself; name another file or directory")
    directory.mkdir(parents=True, exist_ok=True)
    return path
