"""What the training recipe's ``+finetune=from_transformers`` (conf/finetune/from_transformers.yaml) and
conf/model/transformers.yaml name: a transformers Parakeet directory's architecture, tokenizer and front end,
each read from the directory (`asr_plugin.formats.transformers_parakeet`), so that a run trains its model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from asr_plugin.formats.transformers_parakeet import (
    parakeet_architecture,
    parakeet_frontend_spec,
    read_parakeet_config,
    write_parakeet_directory,
)
from asr_plugin.formats.transformers_tokenizer import TOKENIZER_NAME, read_parakeet_tokenizer
from asr_plugin.models import Transducer, build_transducer
from asr_plugin.text.tokenizer import Tokenizer


def parakeet_transducer(path: str | os.PathLike, vocab_size: int | None = None, **overrides: Any) -> Transducer:
    """A randomly initialised Transducer with the architecture of the Parakeet directory `path` (what
    conf/model/transformers.yaml names; the fine-tuning preset then loads the directory's weights)."""
    return build_transducer(**parakeet_architecture(path, vocab_size, **overrides))


def parakeet_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """The Parakeet directory's tokenizer (its tokenizer.json as SentencePiece, their token k our k + 1)."""
    directory = Path(path)
    tokenizer = read_parakeet_tokenizer(directory, read_parakeet_config(directory)["vocab_size"])
    if tokenizer is None:
        raise ValueError(f"{directory / TOKENIZER_NAME}: no such file; give the recipe's tokenizer (data.tokenizer)")
    return tokenizer


def parakeet_frontend(path: str | os.PathLike) -> dict[str, Any]:
    """The front-end spec of the Parakeet directory's preprocessor_config.json (a NeMo front end)."""
    spec = parakeet_frontend_spec(Path(path))
    if spec is None:
        raise ValueError(f"{path}: no preprocessor_config.json (the processor's feature extractor)")
    return spec


def export_transformers(
    source: str | os.PathLike, path: str | os.PathLike, like: str | os.PathLike | None = None, avg: int = 1
) -> Path:
    """Writes the model file `source` (a training checkpoint or a directory of them, averaging the last `avg`; a
    Parakeet directory) as the transformers Parakeet directory `path`, with the processor's files (tokenizer,
    features, generation settings) and token ids of the Parakeet directory `like` (the one a run fine-tuned: the
    checkpoint must have its tokenizer and features), by default of `source` itself when it is one."""
    from asr_plugin.formats import read_model

    loaded = read_model(source, avg)
    return write_parakeet_directory(loaded, Path(path), None if like is None else Path(like))
