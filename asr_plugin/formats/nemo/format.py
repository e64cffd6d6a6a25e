"""NeMo's ``.nemo`` file as a model format: read with `import_nemo` (no NeMo needed), written with `write_nemo`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from asr_plugin.formats.base import LoadedModel, ModelFormat, Settings, Weights
from asr_plugin.formats.nemo.archive import is_nemo_archive, read_nemo
from asr_plugin.formats.nemo.config import loss_kwargs
from asr_plugin.formats.nemo.importer import import_nemo, nemo_state_dict, nemo_transducer_kwargs, split_auxiliary_ctc
from asr_plugin.formats.nemo.training_options import readable_training_options
from asr_plugin.formats.nemo.writer import write_nemo

log = logging.getLogger(__name__)


class NemoFormat(ModelFormat):
    """A NeMo (Fast)Conformer RNN-T, TDT or hybrid RNNT-CTC ``.nemo`` file: architecture, weights (a hybrid's CTC
    decoder as the auxiliary CTC head), SentencePiece tokenizer, preprocessor, and the training and decoding
    settings of its config (`asr_plugin.formats.nemo.training_options`)."""

    name = "nemo"
    description = "a NeMo .nemo file"
    finetune_preset = "from_nemo"
    architecture_target = "asr_plugin.formats.nemo.nemo_transducer"  # conf/model/nemo.yaml

    def claims(self, path: Path) -> bool:
        return is_nemo_archive(path)

    def read_model(self, paths: Sequence[Path], device: str | torch.device = "cpu") -> LoadedModel:
        if len(paths) != 1:
            raise ValueError(f"{[str(p) for p in paths]}: a .nemo file holds one model; give one")
        loaded = import_nemo(paths[0]).loaded()
        loaded.model.to(device)
        return loaded

    def read_weights(self, path: Path, blank_id: int | None = None) -> Weights:
        state, report = nemo_state_dict(path)  # raises on a missing file or a config we cannot express
        log.log(logging.WARNING if report.lost else logging.INFO, "%s: %s", path, report.summary())
        return Weights(*split_auxiliary_ctc(state))

    def read_settings(self, path: Path) -> Settings:
        config = read_nemo(path, weights=False).config
        settings, refused = readable_training_options(config)
        return Settings({**settings, **loss_kwargs(config)}, refused, str(path))

    def read_architecture(self, path: Path, vocab_size: int | None = None, **overrides: Any) -> dict[str, Any]:
        return nemo_transducer_kwargs(path, vocab_size, **overrides)

    def write(self, model: LoadedModel, path: Path) -> Path:
        return write_nemo(model, path)
