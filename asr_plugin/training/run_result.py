"""A run's result as a file in its run directory (``result.json``): what ``train(cfg)`` returned, so that what
reads runs afterwards (the summary of a Hydra multirun, `asr_plugin.training.sweep_summary`) needs neither the
process that trained nor its logs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from asr_plugin.files import write_text_atomic

RESULT_FILE = "result.json"


def write_run_result(result: dict[str, Any]) -> Path:
    """Writes `result` (``train(cfg)``'s summary, plain JSON data) as ``<result["output_dir"]>/result.json``."""
    path = Path(result["output_dir"]) / RESULT_FILE
    write_text_atomic(path, json.dumps(result, indent=1, sort_keys=True) + "\n")
    return path


def read_run_result(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The result the run in `run_dir` wrote; None when it wrote none (it failed, or is still running).
    ValueError naming the file when it is not a JSON object."""
    path = Path(run_dir) / RESULT_FILE
    if not path.is_file():
        return None
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a run result ({err})") from None
    if not isinstance(result, dict):
        raise ValueError(f"{path}: not a run result (a JSON object), got {type(result).__name__}")
    return result
