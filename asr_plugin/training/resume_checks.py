"""Whether a checkpoint can continue in this run: the same tokenizer, front end and architecture (its whole model
config, also where the weights would fit: an attention context changes no shape).

Lightning restores any state dict whose keys and shapes fit, so a tokenizer of the same size but other
pieces would be "Restored all states" and train on ids that now mean other pieces; a different size or
architecture gives torch's key/size error without saying which setting differs. These checks run in
``TransducerModule.on_load_checkpoint``, before any weight is copied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from asr_plugin.formats.checkpoint import checkpoint_records, current_hyper_parameters
from asr_plugin.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)
SHOWN = 8  # differences listed in a message


def describe_record(name: str, record: Mapping[str, Any]) -> str:
    """A tokenizer record as its tokenizer describes itself (hash, size, blank, convention, case); any other
    record as ``key=value`` pairs, bytes left out and long lists (statistics) counted."""
    if name == "tokenizer":
        try:
            return Tokenizer.from_record(record).describe()
        except ValueError:
            pass  # a damaged record: show its fields

    def shown(value: Any) -> str:
        return f"<{len(value)} values>" if isinstance(value, (list, tuple)) and len(value) > 8 else repr(value)

    return ", ".join(f"{k}={shown(v)}" for k, v in sorted(record.items()) if not isinstance(v, (bytes, bytearray)))


def record_differences(here: Mapping[str, Any], there: Mapping[str, Any]) -> list[str]:
    """Keys whose values differ between two records (or that only one has)."""
    return sorted(k for k in set(here) | set(there) if here.get(k) != there.get(k))


def config_differences(here: Any, there: Any, key: str, where: str = "in the checkpoint") -> list[str]:
    """``key: <this run's value> here, <the other's> <where>`` for each leaf that differs."""
    if isinstance(here, Mapping) and isinstance(there, Mapping):
        return [
            line
            for name in sorted(set(here) | set(there), key=str)
            for line in config_differences(
                here.get(name), there.get(name), f"{key}.{name}" if key else str(name), where
            )
        ]
    return [] if here == there else [f"{key}: {here!r} here, {there!r} {where}"]


def state_mismatch(expected: Mapping[str, torch.Tensor], saved: Mapping[str, Any]) -> list[str]:
    """What keeps ``load_state_dict(saved, strict=True)`` from fitting the `expected` state dict."""
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    shapes = sorted(
        k
        for k in set(expected) & set(saved)
        if isinstance(saved[k], torch.Tensor) and saved[k].shape != expected[k].shape
    )
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing (e.g. {missing[:3]})")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected (e.g. {unexpected[:3]})")
    if shapes:
        k = shapes[0]
        problems.append(
            f"{len(shapes)} of another shape (e.g. {k}: {tuple(saved[k].shape)} in the checkpoint, "
            f"{tuple(expected[k].shape)} here)"
        )
    return problems


def check_resumable(module: Any, checkpoint: Mapping[str, Any]) -> None:
    """Raises ValueError when `checkpoint` does not belong to `module`'s tokenizer, front end or architecture.

    Args:
        module: the ``TransducerModule`` about to be restored (its ``records``, ``hparams``, ``state_dict()``).
        checkpoint: the loaded checkpoint dict.
    """
    records = checkpoint_records(checkpoint)
    for name in ("tokenizer", "frontend"):
        here, there = module.records.get(name), records.get(name)
        if here is None:
            continue
        if there is None:
            log.warning(
                "the checkpoint has no %s record (written before checkpoints recorded it): cannot check "
                "that this run's %s (%s) is the one it was trained with",
                name,
                name,
                describe_record(name, here),
            )
            continue
        differing = record_differences(here, there)
        if differing:
            raise ValueError(
                f"the checkpoint was trained with another {name} ({', '.join(differing)} differ): "
                f"this run's is {describe_record(name, here)}; the checkpoint's is "
                f"{describe_record(name, there)}. "
                f"Resume with the data settings of the run that wrote it."
            )
    problems = state_mismatch(module.state_dict(), checkpoint.get("state_dict", {}))
    if problems:
        saved = checkpoint.get("hyper_parameters", {})
        differing = config_differences(
            {k: module.hparams.get(k) for k in ("model", "ctc_weight")},
            {k: saved.get(k) for k in ("model", "ctc_weight")},
            "",
        )
        listed = "; ".join(differing[:SHOWN]) or "none (the same model config)"
        raise ValueError(
            f"the checkpoint's weights do not fit this model ({'; '.join(problems)}). Config keys "
            f"that differ from the checkpoint's: {listed}"
        )
    # Weights that fit are not the same model: another att_context_size (or dropout, lattice, ...) changes no
    # shape, and the resumed run would record settings it was only partly trained with.
    here, there = module.hparams.get("model"), current_hyper_parameters(checkpoint.get("hyper_parameters", {}))
    differing = config_differences(here, there.get("model"), "model") if here is not None else []
    if differing:
        raise ValueError(
            f"the checkpoint was trained with another model config ({'; '.join(differing[:SHOWN])}): resuming "
            "continues its training as it was; resume with its model settings, or start a new run from its "
            "weights with +finetune=from_checkpoint finetune.path=<the checkpoint>"
        )
