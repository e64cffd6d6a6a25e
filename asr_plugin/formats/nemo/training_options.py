"""What a NeMo model config says about how the model was trained and is decoded, as this recipe's settings.

`+finetune=from_nemo` leaves these settings null ("the checkpoint's"), and ``train(cfg)`` fills them from here, so
fine-tuning trains the checkpoint's own objective with its own augmentation and validates with its own greedy
decoding:

- ``loss_reduction``: ``rnnt_reduction`` (NeMo's default ``mean_batch`` when absent; the FastConformer configs
  say ``mean_volume``);
- ``ctc_weight`` and ``ctc_reduction``: a hybrid RNNT-CTC model's ``aux_ctc.ctc_loss_weight`` and
  ``aux_ctc.ctc_reduction`` (0 and ``mean_batch`` without ``aux_ctc``: a plain transducer);
- ``max_symbols_per_frame``: ``decoding.greedy.max_symbols`` (NeMo's default 10);
- ``spec_augment``: ``spec_augment`` (NeMo's ``SpectrogramAugmentation``) as an ``asr_plugin.data.SpecAugment``
  node, or None when the config has none or masks nothing.

Nothing in the config is built: only these keys are read, and a value we cannot honour is a ValueError naming it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from asr_plugin.formats.nemo.archive import read_nemo

SPEC_AUGMENT_TARGET = "asr_plugin.data.SpecAugment"
# SpectrogramAugmentation's keys we map, and the ones that must keep NeMo's "off" value
SPEC_AUGMENT_KEYS = (
    "_target_",
    "freq_masks",
    "time_masks",
    "freq_width",
    "time_width",
    "rect_masks",
    "rect_time",
    "rect_freq",
    "rng",
    "mask_value",
    "use_vectorized_spec_augment",
    "use_numba_spec_augment",
)
SPEC_AUGMENT_OFF = {"rect_masks": 0, "mask_value": 0.0}


def spec_augment_node(section: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Our ``SpecAugment`` node for NeMo's ``spec_augment`` section (None for none or no masks).

    NeMo's ``time_width`` is a fraction of each utterance's frames when a float and a number of frames when an
    int; ours are ``max_time_mask_ratio`` and ``time_mask_width``. NeMo's (vectorized, default) masks draw their
    widths and starts as ours do, and are 0 as ours.
    """
    if not section:
        return None
    unknown = sorted(set(section) - set(SPEC_AUGMENT_KEYS))
    if unknown:
        raise ValueError(
            f"NeMo config: spec_augment.{unknown[0]} is not supported (finetune.augmentation=config "
            "trains with the run's own spec_augment instead)"
        )
    for key, off in SPEC_AUGMENT_OFF.items():
        if float(section.get(key) or 0) != off:
            raise ValueError(
                f"NeMo config: spec_augment.{key}={section[key]!r} is not supported (finetune."
                "augmentation=config trains with the run's own spec_augment instead)"
            )
    freq_masks, time_masks = int(section.get("freq_masks") or 0), int(section.get("time_masks") or 0)
    if freq_masks == 0 and time_masks == 0:
        return None
    width = section.get("time_width", 10)  # SpectrogramAugmentation's default: 10 frames
    ratio = isinstance(width, float)
    return {
        "_target_": SPEC_AUGMENT_TARGET,
        "num_freq_masks": freq_masks,
        "freq_mask_width": int(section.get("freq_width", 10)),
        "num_time_masks": time_masks,
        "time_mask_width": None if ratio else int(width),
        "max_time_mask_ratio": float(width) if ratio else 1.0,
    }


def _ctc_weight(config: Mapping[str, Any]) -> float:
    aux_ctc = config.get("aux_ctc") or {}
    return float(aux_ctc.get("ctc_loss_weight", 0.5)) if aux_ctc else 0.0  # NeMo's default 0.5


# setting -> how NeMo's model config says it (module docstring)
NEMO_SETTINGS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "loss_reduction": lambda config: str(config.get("rnnt_reduction") or "mean_batch"),
    "ctc_weight": _ctc_weight,
    "ctc_reduction": lambda config: str((config.get("aux_ctc") or {}).get("ctc_reduction") or "mean_batch"),
    "max_symbols_per_frame": lambda config: int(
        ((config.get("decoding") or {}).get("greedy") or {}).get("max_symbols") or 10
    ),
    "spec_augment": lambda config: spec_augment_node(config.get("spec_augment")),
}


def nemo_training_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe's settings of NeMo's model config `config` (module docstring); ValueError naming the first it
    cannot express."""
    return {key: read(config) for key, read in NEMO_SETTINGS.items()}


def readable_training_options(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`nemo_training_options` of the settings it can express, and why for each of the others (a model that is
    only decoded or exported needs none of them)."""
    settings, refused = {}, {}
    for key, read in NEMO_SETTINGS.items():
        try:
            settings[key] = read(config)
        except ValueError as err:
            refused[key] = str(err)
    return settings, refused


def read_nemo_training_options(path: str | os.PathLike) -> dict[str, Any]:
    """`nemo_training_options` of the ``.nemo`` file `path` (its config only; the weights are not read)."""
    return nemo_training_options(read_nemo(path, weights=False).config)


def nemo_spec_augment_section(node: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """NeMo's ``spec_augment`` section for our ``SpecAugment`` node (the inverse of `spec_augment_node`; None for
    none). NeMo limits a time mask by one width: ours in frames when set, else the ratio. ValueError for time
    warping, which NeMo's SpectrogramAugmentation does not do."""
    if not node:
        return None
    if node.get("time_warp"):
        raise ValueError(f"spec_augment.time_warp={node['time_warp']}: NeMo's SpectrogramAugmentation has no time warp")
    width = node.get("time_mask_width")
    return {
        "_target_": "nemo.collections.asr.modules.SpectrogramAugmentation",
        "freq_masks": int(node.get("num_freq_masks", 2)),
        "freq_width": int(node.get("freq_mask_width", 27)),
        "time_masks": int(node.get("num_time_masks", 10)),
        "time_width": int(width) if width else float(node.get("max_time_mask_ratio", 0.05)),
    }
