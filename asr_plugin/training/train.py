"""``train(cfg)``: the whole training run from a composed Hydra config (``conf/train.yaml``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig, OmegaConf, open_dict

from asr_plugin.finetune import apply_finetune
from asr_plugin.training.distributed import prepare_data_once
from asr_plugin.training.learning_curves import learning_curves_of
from asr_plugin.training.lightning_module import TransducerModule

log = logging.getLogger(__name__)


def _instantiate_all(node: DictConfig | None, what: str) -> list[Any]:
    """Instantiates every ``_target_`` child of a ``callbacks``/``logger`` node (entries set to null are skipped)."""
    if not node:
        return []
    if not isinstance(node, DictConfig):
        raise TypeError(f"{what} config must be a mapping of name -> _target_ node, got {type(node).__name__}")
    objects = []
    for name, child in node.items():
        if child is None:
            continue
        if not isinstance(child, DictConfig) or "_target_" not in child:
            raise ValueError(f"{what}.{name} has no _target_")
        objects.append(instantiate(child))
    return objects


def resolve_ckpt_path(ckpt_path: str | None, trainer: L.Trainer, search_dir: str | Path) -> str | None:
    """Turns ``ckpt_path`` into a checkpoint file for ``Trainer.fit``.

    "last" means the newest ``last.ckpt`` of this run's checkpoint directory or, when this is a new run
    directory (the usual case after a crash), the newest ``last.ckpt`` under `search_dir`
    (``paths.log_dir/task_name``). Without one it returns None and training starts from scratch, as
    Lightning does, so a requeued job can always pass ``ckpt_path=last``. Any other value must be a file.
    """
    if ckpt_path is None:
        return None
    if ckpt_path != "last":
        if not Path(ckpt_path).is_file():
            raise ValueError(f"ckpt_path={ckpt_path!r} is not a file")
        return str(ckpt_path)
    own = [Path(cb.dirpath) / "last.ckpt" for cb in trainer.checkpoint_callbacks if getattr(cb, "dirpath", None)]
    found = [path for path in own if path.is_file()]
    if not found and Path(search_dir).is_dir():
        found = list(Path(search_dir).rglob("last.ckpt"))
    if not found:
        log.warning("ckpt_path=last: no last.ckpt in this run or under %s; training from scratch", search_dir)
        return None
    newest = max(found, key=lambda path: path.stat().st_mtime)
    log.info("ckpt_path=last resumes from %s", newest)
    return str(newest)


# Below this a LibriSpeech run is using the CPU demo's schedule (200 warmup steps): the LibriSpeech experiments
# warm up for 10k-15k steps, and a transducer at full lr after a few hundred steps of 600 s batches tends to diverge.
MIN_LIBRISPEECH_WARMUP = 1000


def check_schedule_fits_corpus(cfg: DictConfig) -> None:
    """Refuses a LibriSpeech run from scratch with the demo's warmup (``data=librispeech`` without
    ``experiment=...``). Fine-tuning (``cfg.finetune``) starts from trained weights and may warm up briefly."""
    warmup = OmegaConf.select(cfg, "optim.scheduler.warmup_steps")
    if cfg.get("finetune"):
        return
    if OmegaConf.select(cfg, "data.corpus") == "librispeech" and warmup is not None and warmup < MIN_LIBRISPEECH_WARMUP:
        raise ValueError(
            f"optim.scheduler.warmup_steps={warmup} is the CPU demo's warmup, too short for LibriSpeech: train with "
            "`experiment=librispeech_medium` (or librispeech_large), which sets the optimiser, schedule and "
            f"SpecAugment for it, or set optim.scheduler.warmup_steps>={MIN_LIBRISPEECH_WARMUP} yourself")


def build_module(cfg: DictConfig, vocab_size: int) -> TransducerModule:
    """The Lightning module of `cfg` with ``model.vocab_size`` filled in (fine-tuning not applied)."""
    with open_dict(cfg):
        cfg.model.vocab_size = vocab_size
    finetune = cfg.get("finetune")
    return TransducerModule(
        model=OmegaConf.to_container(cfg.model, resolve=True),
        loss=OmegaConf.to_container(cfg.loss, resolve=True),
        optim=OmegaConf.to_container(cfg.optim, resolve=True),
        spec_augment=OmegaConf.to_container(cfg.spec_augment, resolve=True) if cfg.get("spec_augment") else None,
        max_symbols_per_frame=cfg.get("max_symbols_per_frame", 4),
        pretrained_lr=finetune.get("pretrained_lr") if finetune else None,
        ctc_weight=cfg.get("ctc_weight", 0.0),
    )


def train(cfg: DictConfig) -> dict[str, Any]:
    """Trains (and optionally tests) the model described by `cfg`.

    Order: seed -> data module (``prepare_data`` on rank 0, ``setup("fit")`` on all: the tokenizer's
    vocabulary size must be known) -> model and loss -> fine-tuning (``cfg.finetune``) -> callbacks, loggers, Trainer -> fit,
    resuming from ``cfg.ckpt_path`` ("last" or a file) -> test with the best checkpoint when ``cfg.test``.

    Returns:
        ``metrics`` (float of every logged epoch metric, test metrics included), ``best_model_path``,
        ``last_model_path``, ``output_dir``, ``global_step``, ``learning_curves`` (the PNG drawn from the CSV
        logger's metrics, "" without a CSV logger or on ranks other than 0).
    """
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)

    check_schedule_fits_corpus(cfg)
    datamodule = instantiate(cfg.data)
    prepare_data_once(datamodule)  # rank 0 writes manifests, tokenizer, stats; the other ranks wait for them
    datamodule.setup("fit")
    module = build_module(cfg, datamodule.tokenizer.vocab_size)
    if cfg.get("finetune"):
        module.mark_pretrained(apply_finetune(module.model, cfg.finetune))

    callbacks = _instantiate_all(cfg.get("callbacks"), "callbacks")
    loggers = _instantiate_all(cfg.get("logger"), "logger")
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    if loggers:
        for logger in loggers:
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    ckpt_path = resolve_ckpt_path(cfg.get("ckpt_path"), trainer, Path(cfg.paths.log_dir) / cfg.get("task_name", "train"))
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    metrics = {key: float(value) for key, value in trainer.callback_metrics.items()}

    checkpoint = next((cb for cb in trainer.checkpoint_callbacks if isinstance(cb, ModelCheckpoint) and cb.monitor), None)
    best = checkpoint.best_model_path if checkpoint else ""
    if cfg.get("test"):
        trainer.test(module, datamodule=datamodule, ckpt_path=best or None)
        metrics.update({key: float(value) for key, value in trainer.callback_metrics.items() if key.startswith("test/")})
    last = next((cb.last_model_path for cb in trainer.checkpoint_callbacks if getattr(cb, "last_model_path", "")), "")
    curves = learning_curves_of(trainer, Path(cfg.paths.output_dir) / "learning_curves.png")
    return {
        "learning_curves": str(curves) if curves else "",
        "metrics": metrics,
        "best_model_path": best,
        "last_model_path": last,
        "output_dir": str(cfg.paths.output_dir),
        "global_step": trainer.global_step,
    }
