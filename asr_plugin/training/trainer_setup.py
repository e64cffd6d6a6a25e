"""The Trainer of a training config: its callbacks and loggers, SLURM's layout and requeue signal, SIGTERM at a step
boundary, checkpoints written through the model-format seam."""

from __future__ import annotations

from typing import Any

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import LearningRateMonitor
from omegaconf import DictConfig

from asr_plugin.config_nodes import TARGET
from asr_plugin.training.checkpoint_io import AtomicCheckpointIO
from asr_plugin.training.run_length import length_overrides
from asr_plugin.training.signal_stop import StepBoundaryStop
from asr_plugin.training.slurm_requeue import slurm_callbacks


def instantiate_all(node: DictConfig | None, what: str) -> list[Any]:
    """Instantiates every ``_target_`` child of a ``callbacks``/``logger`` node (entries set to null are skipped)."""
    if not node:
        return []
    if not isinstance(node, DictConfig):
        raise TypeError(f"{what} config must be a mapping of name -> _target_ node, got {type(node).__name__}")
    objects = []
    for name, child in node.items():
        if child is None:
            continue
        if not isinstance(child, DictConfig) or TARGET not in child:
            raise ValueError(f"{what}.{name} has no _target_")
        objects.append(instantiate(child))
    return objects


def build_trainer(cfg: DictConfig) -> tuple[L.Trainer, StepBoundaryStop]:
    """The Trainer of ``cfg.trainer`` with ``cfg.callbacks`` and ``cfg.logger``, SLURM's layout and requeue
    callback under SLURM (`slurm_callbacks`), and the callback that stops at a step boundary on SIGTERM (returned
    too: ``fit_or_stop`` asks it); checkpoints are saved through `AtomicCheckpointIO` unless the config brings
    its own ``CheckpointIO`` plugin; a ``trainer.max_steps`` that is set ends the run (`length_overrides`)."""
    from lightning.fabric.plugins import CheckpointIO

    callbacks = instantiate_all(cfg.get("callbacks"), "callbacks") + slurm_callbacks(cfg.trainer)
    stopper = StepBoundaryStop()  # SIGTERM: a checkpoint at the next step boundary, then the summary and 143
    callbacks.append(stopper)
    loggers = instantiate_all(cfg.get("logger"), "logger")
    if not loggers:  # Lightning refuses a learning-rate monitor with nothing to log to
        callbacks = [callback for callback in callbacks if not isinstance(callback, LearningRateMonitor)]
    plugins = instantiate(cfg.trainer.get("plugins"), _convert_="all") or []
    plugins = list(plugins) if isinstance(plugins, list) else [plugins]
    if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
        plugins.append(AtomicCheckpointIO())
    # _convert_: plain lists (Lightning 2.4, the nemo extra's, wraps a ListConfig of plugins as one plugin)
    trainer = instantiate(
        cfg.trainer,
        callbacks=callbacks,
        logger=loggers or False,
        plugins=plugins,
        _convert_="all",
        **length_overrides(cfg.trainer),
    )
    return trainer, stopper
