"""Vocabulary change: keep everything but the token-indexed layers when the tokenizer changes."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import torch

from asr_plugin.models import Transducer

log = logging.getLogger(__name__)

# The two layers indexed by token id; everything else (encoder, LSTM, joint projections) is token-agnostic.
VOCAB_LAYERS = ("predictor.embedding", "joint.output")
_OUTPUT_WEIGHT = "joint.output.weight"


def source_vocab_size(source: Mapping[str, torch.Tensor]) -> int | None:
    """Rows of a transducer state dict's joint output layer (V, plus D for a TDT joint), or None without one."""
    weight = source.get(_OUTPUT_WEIGHT)
    return int(weight.shape[0]) if weight is not None else None


def vocabulary_changed(model: Transducer, source: Mapping[str, torch.Tensor], new_vocabulary: bool | str) -> bool:
    """Decides whether the token-indexed layers must be re-initialised.

    Args:
        new_vocabulary: True (a new tokenizer, even of the same size), False (same tokenizer: a size
            difference is then an error) or "auto" (changed when the sizes differ).
    """
    if new_vocabulary not in (True, False, "auto"):
        raise ValueError(f"new_vocabulary={new_vocabulary!r} must be true, false or auto")
    size = source_vocab_size(source)
    if size is not None:  # a TDT joint's duration rows follow the tokens (the model's lattice's extra outputs)
        size -= model.lattice.num_extra_outputs
    if new_vocabulary == "auto":
        return size is not None and size != model.vocab_size
    if not new_vocabulary and size is not None and size != model.vocab_size:
        raise ValueError(
            f"new_vocabulary=false but the checkpoint has {size} output tokens and the model {model.vocab_size}; "
            "set new_vocabulary to true or auto to fine-tune with a new tokenizer"
        )
    return bool(new_vocabulary)


def reinit_vocab_layers(model: Transducer, layers: Sequence[str], source_size: int | None) -> list[str]:
    """Re-initialises the `layers` (module names such as "joint.output") and returns their state-dict key patterns.

    The caller excludes the returned patterns from loading so the fresh weights stay.
    """
    modules = dict(model.named_modules())
    unknown = [name for name in layers if name not in modules]
    if unknown:
        raise ValueError(f"reinit_on_vocab_change: no module named {unknown} in the model")
    for name in layers:
        modules[name].reset_parameters()
    log.warning(
        "vocabulary change (checkpoint: %s tokens, model: %d): re-initialising %s; the encoder and the "
        "other layers are loaded from the checkpoint",
        source_size if source_size is not None else "unknown",
        model.vocab_size,
        ", ".join(layers) or "nothing",
    )
    return [f"{name}.*" for name in layers]
