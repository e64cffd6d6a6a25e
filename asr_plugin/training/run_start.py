"""What a run starts from and what it builds from there: the checkpoint it resumes, the settings it takes from it or
from the fine-tuning source (logged first), the data module and the Lightning module with its weights.

Everything read from a model file is read through the model-format seam (`asr_plugin.formats`), once: a run that
fine-tunes a file's architecture (conf/model/nemo.yaml) stores it, its loss options, tokenizer and front end in
its checkpoints, and a resumed run takes them from there, so the file is not read again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from asr_plugin.config_nodes import TARGET
from asr_plugin.finetune import apply_finetune
from asr_plugin.formats import LOSS_SETTINGS, architecture_format, architecture_node
from asr_plugin.formats.checkpoint import (
    BUILD_TRANSDUCER,
    MODEL_NODE,
    check_model_node,
    checkpoint_records,
    read_checkpoint,
)
from asr_plugin.formats.state_dict import extract_model_state
from asr_plugin.text import Tokenizer
from asr_plugin.training.distributed import prepare_data_once
from asr_plugin.training.finetune_settings import describe_settings, module_settings
from asr_plugin.training.lightning_module import TransducerModule
from asr_plugin.training.signal_stop import PREPARATION, stop_on_signal

log = logging.getLogger(__name__)
# The record of a checkpoint holding its longest training utterance in seconds, absent when the data module did not
# read its training set ahead (a streamed Shar set) and in checkpoints written before it was recorded; the default
# chunk length of transcribing a long file (`asr_plugin.evaluation.chunk_length`).
LONGEST_UTTERANCE_RECORD = "longest_training_utterance_s"


@dataclass
class RunStart:
    """Where a run starts: the checkpoint it resumes (None: a new run) and the `TransducerModule` settings it
    takes (`module_settings`) with where each came from."""

    ckpt_path: str | None = None
    resumed: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, cfg: DictConfig, ckpt_path: str | None) -> RunStart:
        """The start of `cfg` resuming `ckpt_path` (None: none); the settings and their origins are logged, the
        run's first lines."""
        resumed = read_checkpoint(ckpt_path) if ckpt_path is not None else None
        settings, origins = module_settings(cfg, resumed)
        for line in describe_settings(cfg, settings, origins):
            log.info("%s", line)
        return cls(ckpt_path, resumed, settings, origins)


def model_architecture(model_cfg: dict[str, Any], resumed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model node a checkpoint stores: plain ``build_transducer`` arguments, never a reference to another
    file (`asr_plugin.formats.architecture_node` reads a file's architecture, once); resuming (`resumed`: the
    checkpoint) takes the one the checkpoint recorded instead, so a fine-tuned run resumes without its file."""
    saved = (resumed or {}).get("hyper_parameters", {}).get("model")
    fmt = architecture_format(model_cfg)
    if fmt is not None and isinstance(saved, dict) and saved.get(TARGET) == BUILD_TRANSDUCER:
        log.info("resuming: the architecture is the checkpoint's (%s is not read)", model_cfg.get("path"))
        check_model_node(saved, extract_model_state(resumed, "ckpt_path"), f"ckpt_path: {MODEL_NODE}")
        return dict(saved)
    return architecture_node(model_cfg)


def loss_node(
    loss_cfg: dict[str, Any], model_cfg: dict[str, Any], resumed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The loss node a checkpoint stores. A model whose architecture is a file's (``model: nemo``) also takes the
    file's own loss options (`asr_plugin.formats.LOSS_SETTINGS`: a TDT loss's omega) where the loss config leaves
    them unset; they are read here, once, and a resumed run takes them from its checkpoint. (The lattice is the
    model's, in the architecture.)"""
    fmt = architecture_format(model_cfg)
    if fmt is None:
        return loss_cfg
    saved = (resumed or {}).get("hyper_parameters", {}).get("loss")
    source = saved if isinstance(saved, dict) else fmt.read_settings(Path(model_cfg["path"]))
    own = {key: source.get(key) for key in LOSS_SETTINGS if source.get(key) is not None}
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


def build_datamodule(cfg: DictConfig, start: RunStart) -> Any:
    """The data module of ``cfg.data`` (`data_from_checkpoint`), prepared (rank 0 writes manifests, tokenizer and
    statistics; the other ranks wait for them) and set up for fitting (the tokenizer's size is then known)."""
    data, objects = data_from_checkpoint(cfg, start.resumed)
    datamodule = instantiate(data, **objects)
    with stop_on_signal(PREPARATION):  # SIGTERM: StoppedBySignal at once, the files finished are kept (exit 143)
        prepare_data_once(datamodule)
    datamodule.setup("fit")
    return datamodule


def build_module(cfg: DictConfig, datamodule: Any, start: RunStart) -> TransducerModule:
    """The Lightning module of `cfg` for `datamodule`'s tokenizer (``model.vocab_size``), its data records set
    (saved in every checkpoint: eval, transcription and export read them, resuming compares the tokenizer and the
    front end; `LONGEST_UTTERANCE_RECORD` too when the data module knows it) and, unless
    the resumed checkpoint records a fine-tuning already, the fine-tuning source's weights (``cfg.finetune``)."""
    with open_dict(cfg):
        cfg.model.vocab_size = datamodule.tokenizer.vocab_size
    finetune = cfg.get("finetune")
    model = OmegaConf.to_container(cfg.model, resolve=True)
    module = TransducerModule(
        model=model_architecture(model, start.resumed),
        loss=loss_node(OmegaConf.to_container(cfg.loss, resolve=True), model, start.resumed),
        optim=OmegaConf.to_container(cfg.optim, resolve=True),
        pretrained_lr=finetune.get("pretrained_lr") if finetune else None,
        att_context_seed=cfg.get("seed") or 0,  # a multi-lookahead model's context draw follows the run's seed
        **start.settings,
    )
    longest = datamodule.longest_training_utterance
    durations = {} if longest is None else {LONGEST_UTTERANCE_RECORD: round(float(longest), 3)}
    module.set_records(tokenizer=datamodule.tokenizer.record(), frontend=datamodule.frontend_spec, **durations)
    if finetune and not (start.resumed and "pretrained" in checkpoint_records(start.resumed)):
        module.mark_pretrained(apply_finetune(module.model, finetune, module.ctc))  # else the checkpoint has them
    return module
