"""What decoding takes from a model file: its tokenizer (checked against the model), and the decoding settings of
an evaluation or transcription: the file's own (`LoadedModel.decoding`, what its validation decoded with), each
replaced by the user's value where one is given, and every such override logged, so a WER that differs from the
training run's validation says why."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from asr_plugin.formats import LoadedModel
from asr_plugin.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def model_tokenizer(loaded: LoadedModel) -> Tokenizer:
    """`loaded`'s tokenizer; ValueError naming the file when it records none or one of another size than its
    model's vocabulary."""
    tokenizer = loaded.require_tokenizer()
    if tokenizer.vocab_size != loaded.model.vocab_size:
        raise ValueError(
            f"{loaded.path}: its tokenizer has {tokenizer.vocab_size} ids, its model {loaded.model.vocab_size}"
        )
    return tokenizer


def decoding_settings(loaded: LoadedModel, overrides: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """`loaded`'s decoding settings with `overrides` (None values: keep the checkpoint's) applied; `where` prefixes
    the logged names (``decoding.`` for eval.py's config keys). An unknown name is a ValueError."""
    settings = dict(loaded.decoding)
    for name, value in overrides.items():
        if name not in settings:
            raise ValueError(f"{where}{name}: not a recorded decoding setting ({sorted(settings)})")
        if value is None:
            continue
        if value != settings[name]:
            log.warning("%s%s=%s overrides the checkpoint's %s (%s)", where, name, value, settings[name], loaded.path)
        settings[name] = value
    return settings
