"""``train(cfg)``: the whole training run from a composed Hydra config (``conf/train.yaml``)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from omegaconf import DictConfig, OmegaConf, open_dict

from asr_plugin.config_nodes import TARGET, ConfigError, check_arguments, check_config_node
from asr_plugin.data import Tokenizer
from asr_plugin.finetune import apply_finetune
from asr_plugin.finetune.checkpoint import extract_model_state
from asr_plugin.finetune.nemo import nemo_loss_kwargs, nemo_transducer_kwargs
from asr_plugin.training.checkpoint_io import AtomicCheckpointIO
from asr_plugin.training.ckpt_path import resolve_ckpt_path
from asr_plugin.training.distributed import prepare_data_once, slurm_layout
from asr_plugin.training.finetune_settings import INHERITED, describe_settings, module_settings
from asr_plugin.training.learning_curves import learning_curves_of
from asr_plugin.training.lightning_module import NODE_TARGETS, TransducerModule
from asr_plugin.training.signal_stop import StepBoundaryStop, final_test_or_stop, fit_or_stop, validate_or_stop
from asr_plugin.training.slurm_requeue import StepBoundaryRequeue
from asr_plugin.transducer_checkpoint import (
    BUILD_TRANSDUCER,
    check_model_node,
    checkpoint_records,
    model_node,
    peek_checkpoint,
)

log = logging.getLogger(__name__)

# Model targets a config may name, each turned into the build_transducer arguments the checkpoint stores.
NEMO_TRANSDUCER = "asr_plugin.finetune.nemo.nemo_transducer"
MODEL_ARCHITECTURES = {
    BUILD_TRANSDUCER: lambda **arguments: arguments,
    NEMO_TRANSDUCER: nemo_transducer_kwargs,  # reads the .nemo's architecture once, here
}


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
        if not isinstance(child, DictConfig) or TARGET not in child:
            raise ValueError(f"{what}.{name} has no _target_")
        objects.append(instantiate(child))
    return objects


def check_config(cfg: DictConfig) -> None:
    """Checks every node that will be built against its target's signature and annotations, before anything
    runs: a wrong-type value (``trainer.max_steps=abc``, ``optim.optimizer.lr=fast``) or an unknown argument
    is a ConfigError naming its key, not an error deep inside Lightning or torch after data preparation."""
    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    model = plain["model"]
    if model.get(TARGET) not in MODEL_ARCHITECTURES:
        raise ConfigError(
            f"model._target_={model.get(TARGET)!r}: the model is built by one of {sorted(MODEL_ARCHITECTURES)}"
        )
    check_config_node(model, "model")
    for key, allowed in NODE_TARGETS.items():  # what the module builds (and its checkpoints store)
        group, _, child = key.partition(".")
        node = plain[group][child] if child else plain.get(group)
        if node:
            check_config_node(node, key)
            allowed.resolve(node[TARGET], key)
    check_config_node(plain["data"], "data")
    check_config_node(plain["trainer"], "trainer", supplied=("callbacks", "logger", "plugins"))
    for group in ("callbacks", "logger"):
        for name, node in (plain.get(group) or {}).items():
            if node is not None:
                check_config_node(node, f"{group}.{name}")
    options = {k: plain[k] for k in INHERITED if plain.get(k) is not None}  # null: the checkpoint's
    check_arguments(TransducerModule, options, "", partial=True)


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
            f"SpecAugment for it, or set optim.scheduler.warmup_steps>={MIN_LIBRISPEECH_WARMUP} yourself"
        )


def apply_slurm_layout(trainer_cfg: DictConfig) -> None:
    """Under SLURM, sets ``trainer.devices`` and ``trainer.num_nodes`` from the job's tasks per node and nodes
    (one process per device), so the layout is set in one place; a different explicit value is an error."""
    layout = slurm_layout()
    if layout is None:
        return
    tasks, nodes = layout
    for key, wanted, defaults, variable in (
        ("devices", tasks, (-1, "auto", None), "tasks per node"),
        ("num_nodes", nodes, (1, None), "nodes"),
    ):
        value = trainer_cfg.get(key)
        if value not in (*defaults, wanted):
            raise ValueError(
                f"trainer.{key}={value!r} but this SLURM job has {wanted} {variable} (Lightning runs "
                f"one task per device): drop trainer.{key}, SLURM's layout sets it"
            )
        with open_dict(trainer_cfg):
            trainer_cfg[key] = wanted


def model_architecture(model_cfg: dict[str, Any], resumed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model node a checkpoint stores: plain ``build_transducer`` arguments, never a reference to another
    file. A ``.nemo`` architecture is read here, once; resuming (`resumed`: the checkpoint) takes the one the
    checkpoint recorded instead, so a fine-tuned run resumes without its ``.nemo``."""
    saved = (resumed or {}).get("hyper_parameters", {}).get("model")
    if model_cfg[TARGET] == NEMO_TRANSDUCER and isinstance(saved, dict) and saved.get(TARGET) == BUILD_TRANSDUCER:
        log.info("resuming: the architecture is the checkpoint's (%s is not read)", model_cfg.get("path"))
        check_model_node(saved, extract_model_state(resumed, "ckpt_path"), "ckpt_path: hyper_parameters.model")
        return dict(saved)
    arguments = {k: v for k, v in model_cfg.items() if k != TARGET}
    return model_node(MODEL_ARCHITECTURES[model_cfg[TARGET]](**arguments))


# The loss options a .nemo's own loss gives a fine-tuning run (where the loss config does not set them); its
# lattice (durations, sigma, clamp, FastEmit) is the model's, in the architecture (model_architecture).
NEMO_LOSS_OPTIONS = ("omega",)


def loss_node(
    loss_cfg: dict[str, Any], model_cfg: dict[str, Any], resumed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The loss node a checkpoint stores. Fine-tuning a ``.nemo`` (``model: nemo``), the checkpoint's own TDT
    ``omega`` fills in what the loss config leaves unset; it is read here, once, and a resumed run takes it
    from its checkpoint."""
    if model_cfg[TARGET] != NEMO_TRANSDUCER:
        return loss_cfg
    saved = (resumed or {}).get("hyper_parameters", {}).get("loss")
    source = saved if isinstance(saved, dict) else nemo_loss_kwargs(model_cfg["path"])
    own = {key: source[key] for key in NEMO_LOSS_OPTIONS if source.get(key) is not None}
    return {**own, **loss_cfg}


def data_from_checkpoint(cfg: DictConfig, resumed: dict[str, Any] | None) -> tuple[DictConfig, dict[str, Any]]:
    """The data node to build and the objects to pass it. When resuming, a tokenizer and front end that the data
    config builds from another file (a ``.nemo``'s, ``+finetune=from_nemo``) are the checkpoint's records
    instead, so that file is not read again."""
    records = checkpoint_records(resumed) if resumed else {}
    data, objects = cfg.data, {}
    reads_tokenizer = "tokenizer" in records and OmegaConf.select(cfg, f"data.tokenizer.{TARGET}")
    reads_frontend = "frontend" in records and OmegaConf.select(cfg, f"data.frontend.{TARGET}")
    if reads_tokenizer or reads_frontend:
        data = cfg.data.copy()
        with open_dict(data):
            if reads_tokenizer:
                data.tokenizer = None
                objects["tokenizer"] = Tokenizer.from_record(records["tokenizer"])
            if reads_frontend:
                data.frontend = records["frontend"]
    return data, objects


def build_module(
    cfg: DictConfig, vocab_size: int, resumed: dict[str, Any] | None = None, settings: dict[str, Any] | None = None
) -> TransducerModule:
    """The Lightning module of `cfg` with ``model.vocab_size`` filled in (fine-tuning not applied); `resumed`:
    the checkpoint the run resumes from (see `model_architecture`); `settings`: `module_settings(cfg, resumed)`
    (computed here when not given)."""
    with open_dict(cfg):
        cfg.model.vocab_size = vocab_size
    finetune = cfg.get("finetune")
    model = OmegaConf.to_container(cfg.model, resolve=True)
    if settings is None:
        settings, _ = module_settings(cfg, resumed)
    return TransducerModule(
        model=model_architecture(model, resumed),
        loss=loss_node(OmegaConf.to_container(cfg.loss, resolve=True), model, resumed),
        optim=OmegaConf.to_container(cfg.optim, resolve=True),
        pretrained_lr=finetune.get("pretrained_lr") if finetune else None,
        **settings,
    )


def build_trainer(cfg: DictConfig, callbacks: list[Any], loggers: list[Any]) -> L.Trainer:
    """The Trainer of ``cfg.trainer``, saving checkpoints through `AtomicCheckpointIO` (unless the config
    brings its own ``CheckpointIO`` plugin)."""
    from lightning.fabric.plugins import CheckpointIO

    plugins = instantiate(cfg.trainer.get("plugins"), _convert_="all") or []
    plugins = list(plugins) if isinstance(plugins, list) else [plugins]
    if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
        plugins.append(AtomicCheckpointIO())
    # _convert_: plain lists (Lightning 2.4, the nemo extra's, wraps a ListConfig of plugins as one plugin)
    return instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, plugins=plugins, _convert_="all")


def checked_seed(value: Any) -> int:
    """``seed`` as the integer Lightning seeds with; ConfigError naming the key for anything else."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise ConfigError(f"seed={value!r} must be an integer in [0, 2**32) (or null: no seeding)")
    return value


def validates_first(cfg: DictConfig, resuming: bool) -> bool:
    """``validate_first``: true or false, or null (the default) for "when fine-tuning a pretrained model";
    a resumed run is past its start, so null never validates it again."""
    value = cfg.get("validate_first")
    if value is None:
        return bool(cfg.get("finetune")) and not resuming
    if not isinstance(value, bool):
        raise ConfigError(f"validate_first={value!r} must be true, false or null")
    return value


def train(cfg: DictConfig) -> dict[str, Any]:
    """Trains (and optionally tests) the model described by `cfg`.

    Order: config check (every node against its target's signature) -> seed -> callbacks, loggers, Trainer ->
    the checkpoint to resume (``cfg.ckpt_path``: "last" or a file) -> data module (``prepare_data`` on rank 0,
    ``setup("fit")`` on all: the tokenizer's vocabulary size must be known) -> model and loss ->
    fine-tuning (``cfg.finetune``; not when resuming a checkpoint that records it) -> validation before the
    first step (``validate_first``) -> fit -> test with the best checkpoint (else the last weights) when
    ``cfg.test``.

    Returns:
        ``metrics`` (float of every logged epoch metric, test metrics included), ``start_metrics`` (of the
        validation before training, {} without one), ``best_model_path``, ``last_model_path``,
        ``test_weights`` ("best", "last", or "" without a test), ``output_dir``, ``global_step``,
        ``learning_curves`` (the PNG drawn from the CSV logger's metrics, "" without a CSV logger or on ranks
        other than 0), ``stop`` (None, or when a SIGTERM stopped the run at a step boundary: ``signal``,
        ``exit_status`` (143), ``step`` and ``checkpoint``, the file it wrote; the test is then skipped).
    """
    check_config(cfg)
    if cfg.get("seed") is not None:
        L.seed_everything(checked_seed(cfg.seed), workers=True)

    check_schedule_fits_corpus(cfg)
    apply_slurm_layout(cfg.trainer)
    callbacks = _instantiate_all(cfg.get("callbacks"), "callbacks")
    if slurm_layout() is not None:  # SLURM's requeue signal, handled at a step boundary (not mid-step as Lightning)
        callbacks.append(StepBoundaryRequeue())
    stopper = StepBoundaryStop()  # SIGTERM: a checkpoint at the next step boundary, then the summary and 143
    callbacks.append(stopper)
    loggers = _instantiate_all(cfg.get("logger"), "logger")
    if not loggers:  # Lightning refuses a learning-rate monitor with nothing to log to
        callbacks = [callback for callback in callbacks if not isinstance(callback, LearningRateMonitor)]
    trainer = build_trainer(cfg, callbacks, loggers)
    ckpt_path = resolve_ckpt_path(cfg, trainer)
    resumed = peek_checkpoint(ckpt_path) if ckpt_path is not None else None  # tensors mapped, not read
    settings, origins = module_settings(cfg, resumed)
    for line in describe_settings(cfg, settings, origins):  # the run's first lines: what it trains with
        log.info("%s", line)

    data, objects = data_from_checkpoint(cfg, resumed)
    datamodule = instantiate(data, **objects)
    prepare_data_once(datamodule)  # rank 0 writes manifests, tokenizer, stats; the other ranks wait for them
    datamodule.setup("fit")

    module = build_module(cfg, datamodule.tokenizer.vocab_size, resumed, settings)
    # saved in every checkpoint (eval, transcribe and export read them) and compared when resuming
    module.set_records(tokenizer=datamodule.tokenizer.record(), frontend=datamodule.frontend_spec)
    if loggers:
        for logger in loggers:
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    if cfg.get("finetune") and not (resumed and "pretrained" in checkpoint_records(resumed)):
        module.mark_pretrained(apply_finetune(module.model, cfg.finetune, module.ctc))  # else the checkpoint has them

    start_metrics: dict[str, float] = {}
    if validates_first(cfg, resuming=ckpt_path is not None):
        results = validate_or_stop(trainer, stopper, module, datamodule=datamodule, ckpt_path=ckpt_path)
        start_metrics = {key: float(value) for result in results for key, value in result.items()}
    stop = fit_or_stop(trainer, stopper, module, datamodule=datamodule, ckpt_path=ckpt_path)
    metrics = {key: float(value) for key, value in trainer.callback_metrics.items()}

    checkpoint = next(
        (cb for cb in trainer.checkpoint_callbacks if isinstance(cb, ModelCheckpoint) and cb.monitor), None
    )
    best = checkpoint.best_model_path if checkpoint else ""
    test_weights = ""
    if cfg.get("test") and stop is None:
        test_weights = "best" if best else "last"
        stop = final_test_or_stop(trainer, module, datamodule=datamodule, ckpt_path=best or None)
        metrics.update(
            {key: float(value) for key, value in trainer.callback_metrics.items() if key.startswith("test/")}
        )
    last = next((cb.last_model_path for cb in trainer.checkpoint_callbacks if getattr(cb, "last_model_path", "")), "")
    curves = learning_curves_of(trainer, Path(cfg.paths.output_dir) / "learning_curves.png")
    return {
        "learning_curves": str(curves) if curves else "",
        "metrics": metrics,
        "start_metrics": start_metrics,
        "best_model_path": best,
        "last_model_path": last,
        "test_weights": test_weights,
        "output_dir": str(cfg.paths.output_dir),
        "global_step": trainer.global_step,
        "stop": dataclasses.asdict(stop) if stop else None,
    }
