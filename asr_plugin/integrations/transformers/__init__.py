"""The sample-wise transducer loss inside Hugging Face transformers' Parakeet training (docs/transformers.md).

``use_samplewise(model, memory_budget=...)`` makes a built or loaded ``ParakeetForRNNT`` / ``ParakeetForTDT``
compute its training loss sample-wise: ``model(input_features=..., attention_mask=..., labels=...,
decoder_input_ids=...)`` returns the same loss and gradients as transformers' own loss without the
(B, T, U+1, V) joint output; ``undo_samplewise(model)`` restores transformers' forward.

This package imports without transformers; transformers is imported when one of the names below is first used,
and a missing transformers is reported with what to install.
"""

from __future__ import annotations

from importlib import import_module

from .requirement import TRANSFORMERS_TESTED, require_transformers

_LAZY = {
    "ParakeetJoint": "joint",
    "use_samplewise": "swap",
    "undo_samplewise": "swap",
}

__all__ = ["TRANSFORMERS_TESTED", "ParakeetJoint", "undo_samplewise", "use_samplewise"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_transformers(f"{__name__}.{name}")
    return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
