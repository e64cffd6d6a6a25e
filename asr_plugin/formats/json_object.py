"""A JSON object read from a model directory's file, its size bounded before it is parsed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json_object(path: Path, max_bytes: int, what: str) -> dict[str, Any]:
    """The JSON object in `path`; ValueError naming the file when it is missing (`what`: the directory it belongs
    to), larger than `max_bytes`, not JSON or not an object."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file ({what} has {path.name})")
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: {size:,} bytes, more than such a file holds ({max_bytes:,})")
    try:
        node = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    if not isinstance(node, dict):
        raise ValueError(f"{path}: not a JSON object")
    return node
