"""What an export reads from a training checkpoint or a NeMo ``.nemo`` file: the model, its front end, its tokenizer."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asr_plugin.data import Tokenizer
from asr_plugin.finetune import import_nemo
from asr_plugin.finetune.nemo import is_nemo_archive
from asr_plugin.formats import read_model
from asr_plugin.models import Transducer


@dataclass
class ExportSource:
    """A model with the records an export needs."""

    model: Transducer
    frontend_spec: dict[str, Any]
    tokenizer: Tokenizer


def load_export_source(path: str | os.PathLike, avg: int = 1) -> ExportSource:
    """A ``.nemo`` file (imported with `import_nemo`) or a training checkpoint / directory of them (the average of
    the last `avg`); only read. ValueError when a checkpoint lacks its tokenizer and front-end records."""
    path = Path(path)
    if is_nemo_archive(path):
        if avg != 1:
            raise ValueError(f"avg={avg}: a .nemo file holds one model")
        imported = import_nemo(path)
        return ExportSource(imported.model, imported.frontend_spec, imported.tokenizer)
    loaded = read_model(path, avg)
    return ExportSource(loaded.model, loaded.require_frontend_spec(), loaded.require_tokenizer())
