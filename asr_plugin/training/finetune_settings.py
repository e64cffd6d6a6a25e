"""The training and decoding settings a run takes from the checkpoint it starts from, and the lines that say so.

The fine-tuning presets (``conf/finetune/*.yaml``) leave ``max_symbols_per_frame``, ``loss_reduction``,
``ctc_reduction`` (and, for a ``.nemo``, ``ctc_weight``) null: "the checkpoint's". `module_settings` fills each
null from, in order, the checkpoint the run resumes (its own resolved values, so the source file is not read
again), the fine-tuning source (what its file records: `asr_plugin.formats.read_settings`; a ``.nemo``'s config,
`asr_plugin.formats.nemo.nemo_training_options`, a training checkpoint's hyper-parameters) and last `TransducerModule`'s defaults. ``finetune.augmentation:
checkpoint`` likewise replaces ``spec_augment`` by the source's (none when it has none); ``config`` keeps the
run's. `describe_settings` is what ``train(cfg)`` logs before anything runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from asr_plugin.finetune.apply import AUGMENTATION_SOURCES
from asr_plugin.formats import AUTO, Settings, read_settings
from asr_plugin.training.lightning_module import TransducerModule, training_reduction

# Module arguments a config may leave null ("the checkpoint's").
INHERITED = ("max_symbols_per_frame", "loss_reduction", "ctc_reduction", "ctc_weight")


def _module_defaults() -> dict[str, Any]:
    parameters = inspect.signature(TransducerModule).parameters
    return {key: parameters[key].default for key in INHERITED}


def source_settings(finetune: Mapping[str, Any] | None, resumed: Mapping[str, Any] | None) -> Settings:
    """The settings (`INHERITED` and ``spec_augment``) recorded by what the run starts from: the resumed
    checkpoint's hyper-parameters, else what the fine-tuning source's file records (none for a plain state dict
    or torchaudio's RNNT)."""
    if resumed is not None:
        hparams = resumed.get("hyper_parameters") or {}
        if not isinstance(hparams, Mapping):
            return Settings()
        return Settings({key: hparams[key] for key in (*INHERITED, "spec_augment") if key in hparams})
    if finetune and finetune.get("path"):
        return read_settings(finetune["path"], finetune.get("format", AUTO))
    return Settings()


def module_settings(cfg: DictConfig, resumed: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The `TransducerModule` arguments `INHERITED` and ``spec_augment`` of `cfg`, nulls filled (module docstring),
    and where each came from ("config", "checkpoint" or "default")."""
    finetune = OmegaConf.to_container(cfg.finetune, resolve=True) if cfg.get("finetune") else None
    augmentation = (finetune or {}).get("augmentation", "config")
    if augmentation not in AUGMENTATION_SOURCES:
        raise ValueError(f"finetune.augmentation={augmentation!r}: choose one of {AUGMENTATION_SOURCES}")
    wanted = [key for key in INHERITED if cfg.get(key) is None]
    takes_augmentation = finetune is not None and augmentation == "checkpoint"
    source = source_settings(finetune, resumed) if wanted or takes_augmentation or resumed is not None else Settings()
    defaults = _module_defaults()
    settings: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key in INHERITED:
        if cfg.get(key) is not None:
            settings[key], origins[key] = cfg[key], "config"
        elif source.get(key) is not None:
            settings[key], origins[key] = source.get(key), "checkpoint"
        else:
            settings[key], origins[key] = defaults[key], "default"
    if takes_augmentation:
        settings["spec_augment"], origins["spec_augment"] = source.get("spec_augment"), "checkpoint"
    else:
        node = cfg.get("spec_augment")
        settings["spec_augment"] = OmegaConf.to_container(node, resolve=True) if node else None
        origins["spec_augment"] = "config"
    return settings, origins


def _spec_augment_text(node: Mapping[str, Any] | None) -> str:
    if not node:
        return "none"
    return ", ".join(f"{key}={value}" for key, value in node.items() if key != "_target_")


def describe_settings(cfg: DictConfig, settings: Mapping[str, Any], origins: Mapping[str, str]) -> list[str]:
    """The lines ``train(cfg)`` logs first: the optimiser and schedule, and each setting with where it came from."""
    optimizer = OmegaConf.to_container(cfg.optim.optimizer, resolve=True)
    scheduler = OmegaConf.to_container(cfg.optim.scheduler, resolve=True)

    def arguments(node: dict[str, Any]) -> str:
        return ", ".join(f"{key}={value}" for key, value in node.items() if not key.startswith("_"))

    lines = [
        f"optimizer: {optimizer['_target_']} ({arguments(optimizer)})",
        f"schedule: {scheduler['_target_']} ({arguments(scheduler)})",
    ]
    if cfg.get("finetune") and cfg.finetune.get("pretrained_lr") is not None:
        lines.append(f"pretrained_lr: {cfg.finetune.pretrained_lr} (the loaded weights)")
    for key in (*INHERITED, "spec_augment"):
        value = settings[key]
        if key == "spec_augment":
            value = _spec_augment_text(value)
        elif key == "loss_reduction":
            value = training_reduction(OmegaConf.to_container(cfg.loss, resolve=True), value)
        lines.append(f"{key}: {value} ({origins[key]})")
    return lines
