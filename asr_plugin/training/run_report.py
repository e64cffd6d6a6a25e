"""What a run reports: the validation before its first step, the test of its best checkpoint, and the summary
``train(cfg)`` returns."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig

from asr_plugin.training.config_check import validates_first
from asr_plugin.training.learning_curves import learning_curves_of
from asr_plugin.training.signal_stop import SignalStop, StepBoundaryStop, final_test_or_stop, validate_or_stop


def logged_metrics(trainer: L.Trainer, prefix: str = "") -> dict[str, float]:
    """The float of every metric the trainer last logged (those starting with `prefix`)."""
    return {key: float(value) for key, value in trainer.callback_metrics.items() if key.startswith(prefix)}


def validate_first(
    cfg: DictConfig,
    trainer: L.Trainer,
    stopper: StepBoundaryStop,
    module: L.LightningModule,
    datamodule: Any,
    ckpt_path: str | None,
) -> dict[str, float]:
    """The metrics of a validation before the first step (`validates_first`: so the starting WER is logged at
    step 0), {} without one or when a signal stopped it (`validate_or_stop`: the fit then does not start)."""
    if not validates_first(cfg, resuming=ckpt_path is not None):
        return {}
    results = validate_or_stop(trainer, stopper, module, datamodule=datamodule, ckpt_path=ckpt_path)
    return {key: float(value) for result in results for key, value in result.items()}


def ranking_checkpoint(trainer: L.Trainer) -> ModelCheckpoint | None:
    """The first checkpoint callback that monitors a metric (None without one): the one that says which is best."""
    return next((cb for cb in trainer.checkpoint_callbacks if isinstance(cb, ModelCheckpoint) and cb.monitor), None)


def best_model_path(trainer: L.Trainer) -> str:
    """The best checkpoint of `ranking_checkpoint` ("" without one)."""
    checkpoint = ranking_checkpoint(trainer)
    return checkpoint.best_model_path if checkpoint else ""


def best_score(trainer: L.Trainer) -> tuple[str, float | None]:
    """(the metric `ranking_checkpoint` ranks by, its best value so far: None before the first validation);
    ("", None) without such a callback."""
    checkpoint = ranking_checkpoint(trainer)
    if checkpoint is None:
        return "", None
    score = checkpoint.best_model_score
    return checkpoint.monitor, None if score is None else float(score)


def last_checkpoint_path(trainer: L.Trainer) -> str:
    """The run's last checkpoint: the one a checkpoint callback says it saved last, else the ``last.ckpt`` a
    ``save_last`` callback keeps in its directory (a callback's record is empty when, e.g., another callback wrote
    that file: the conf's epoch and step callbacks share it); "" when there is none."""
    callbacks = [cb for cb in trainer.checkpoint_callbacks if isinstance(cb, ModelCheckpoint)]
    recorded = next((cb.last_model_path for cb in callbacks if cb.last_model_path), "")
    if recorded:
        return recorded
    on_disk = [
        Path(cb.dirpath) / f"{cb.CHECKPOINT_NAME_LAST}{cb.FILE_EXTENSION}"
        for cb in callbacks
        if cb.save_last and cb.dirpath
    ]
    return next((str(path) for path in on_disk if path.is_file()), "")


def test_best(
    trainer: L.Trainer, module: L.LightningModule, datamodule: Any, metrics: dict[str, float]
) -> tuple[str, SignalStop | None]:
    """Tests the best checkpoint (else the last weights) on the data module's test splits, adds the ``test/``
    metrics to `metrics` and returns which weights it tested ("best" or "last") and the `SignalStop` of a signal
    that ended the test (`final_test_or_stop`: its results are then not added), else None."""
    best = best_model_path(trainer)
    stop = final_test_or_stop(trainer, module, datamodule=datamodule, ckpt_path=best or None)
    if stop is None:
        metrics.update(logged_metrics(trainer, "test/"))
    return "best" if best else "last", stop


def run_report(
    cfg: DictConfig,
    trainer: L.Trainer,
    metrics: dict[str, float],
    start_metrics: dict[str, float],
    test_weights: str,
    stop: SignalStop | None,
) -> dict[str, Any]:
    """The summary ``train(cfg)`` returns (see there); draws the learning curves from the CSV logger's metrics."""
    last = last_checkpoint_path(trainer)
    monitor, score = best_score(trainer)
    curves = learning_curves_of(trainer, Path(cfg.paths.output_dir) / "learning_curves.png")
    return {
        "learning_curves": str(curves) if curves else "",
        "metrics": metrics,
        "start_metrics": start_metrics,
        "best_model_path": best_model_path(trainer),
        "monitor": monitor,
        "best_model_score": score,
        "last_model_path": last,
        "test_weights": test_weights,
        "output_dir": str(cfg.paths.output_dir),
        "global_step": trainer.global_step,
        "stop": dataclasses.asdict(stop) if stop else None,
    }
