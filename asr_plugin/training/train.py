"""``train(cfg)``: the whole training run from a composed Hydra config (``conf/train.yaml``): instantiate, fit,
test, report. What it builds and how is in the modules it calls (`config_check`, `trainer_setup`, `run_start`,
`run_report`)."""

from __future__ import annotations

from typing import Any

import lightning as L
from omegaconf import DictConfig, OmegaConf

from asr_plugin.training.ckpt_path import resolve_ckpt_path
from asr_plugin.training.config_check import check_config, checked_seed
from asr_plugin.training.run_report import logged_metrics, run_report, test_best, validate_first
from asr_plugin.training.run_result import write_run_result
from asr_plugin.training.run_start import RunStart, build_datamodule, build_module
from asr_plugin.training.signal_stop import fit_or_stop
from asr_plugin.training.trainer_setup import build_trainer


def train(cfg: DictConfig) -> dict[str, Any]:
    """Trains (and optionally tests) the model described by `cfg`.

    Order: config check (every node against its target's signature, the schedule against the corpus) -> seed ->
    Trainer (callbacks, loggers, SLURM, checkpoint IO) -> the checkpoint to resume (``cfg.ckpt_path``: "last" or
    a file) and the settings taken from it or from the fine-tuning source (logged first) -> data module
    (``prepare_data`` on rank 0, ``setup("fit")`` on all: the tokenizer's vocabulary size must be known) ->
    model, loss and fine-tuning (``cfg.finetune``; not when resuming a checkpoint that records it) ->
    validation before the first step (``validate_first``) -> fit -> test with the best checkpoint (else the last
    weights) when ``cfg.test`` -> the summary below written as ``<output_dir>/result.json`` by rank 0
    (`asr_plugin.training.run_result`: what a multirun's summary reads).

    Returns:
        ``metrics`` (float of every logged epoch metric, test metrics included), ``start_metrics`` (of the
        validation before training, {} without one), ``best_model_path``, ``monitor`` and ``best_model_score``
        (the metric the checkpoints are ranked by and its best value, None before a validation), ``last_model_path``,
        ``test_weights`` ("best", "last", or "" without a test), ``output_dir``, ``global_step``,
        ``learning_curves`` (the PNG drawn from the CSV logger's metrics, "" without a CSV logger or on ranks
        other than 0), ``stop`` (None, or when a SIGTERM stopped the run: ``signal``, ``exit_status`` (143),
        ``step``, ``checkpoint`` (the file it wrote at a step boundary, or the weights a stopped test used) and
        ``stage`` (validation before training, training, test); after training the test is then skipped).
    """
    check_config(cfg)
    if cfg.get("seed") is not None:
        L.seed_everything(checked_seed(cfg.seed), workers=True)
    trainer, stopper = build_trainer(cfg)
    ckpt_path = resolve_ckpt_path(cfg, trainer)
    start = RunStart.of(cfg, ckpt_path)
    datamodule = build_datamodule(cfg, start)
    module = build_module(cfg, datamodule, start)
    for logger in trainer.loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    start_metrics = validate_first(cfg, trainer, stopper, module, datamodule, ckpt_path)
    stop = fit_or_stop(trainer, stopper, module, datamodule=datamodule, ckpt_path=ckpt_path)
    metrics = logged_metrics(trainer)
    test_weights = ""
    if cfg.get("test") and stop is None:
        test_weights, stop = test_best(trainer, module, datamodule, metrics)
    result = run_report(cfg, trainer, metrics, start_metrics, test_weights, stop)
    if trainer.is_global_zero:
        write_run_result(result)
    return result
