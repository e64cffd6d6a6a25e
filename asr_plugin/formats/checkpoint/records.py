"""What a training checkpoint says besides its weights: its hyper-parameters and the project's records."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asr_plugin.formats.base import LOSS_SETTINGS, SETTINGS, Settings
from asr_plugin.formats.checkpoint.model_node import current_hyper_parameters
from asr_plugin.frontend.spec import complete_frontend_spec
from asr_plugin.plain_data import refuse_interpolations
from asr_plugin.text.tokenizer import Tokenizer

# The checkpoint key of the project's records (Lightning's own keys stay as they are).
RECORDS_KEY = "asr_plugin"


def checkpoint_records(checkpoint: Mapping[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    """The project's records of a loaded checkpoint ({} for checkpoints written before they existed). They are
    data: a string in them that looks like an OmegaConf interpolation is refused by key (a record may reach a
    Hydra config, which would resolve it)."""
    records = checkpoint.get(RECORDS_KEY, {})
    records = dict(records) if isinstance(records, Mapping) else {}
    refuse_interpolations(records, RECORDS_KEY, source)
    return records


@dataclass
class CheckpointInfo:
    """What a training checkpoint says besides its weights: its config nodes and its records."""

    path: Path
    hyper_parameters: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, checkpoint: Mapping[str, Any], path: str | os.PathLike) -> CheckpointInfo:
        hparams = checkpoint.get("hyper_parameters", {})
        hparams = current_hyper_parameters(hparams) if isinstance(hparams, Mapping) else {}
        return cls(Path(path), hparams, checkpoint_records(checkpoint, str(path)))

    @property
    def has_data_records(self) -> bool:
        """Whether it records its tokenizer and front end (checkpoints of earlier versions do not)."""
        return "tokenizer" in self.records and "frontend" in self.records

    @property
    def missing_records(self) -> str:
        """Why a checkpoint without data records has no tokenizer and front end, and what to do."""
        return (
            "no tokenizer and front-end record (a checkpoint written before checkpoints carried them): decode it "
            "with eval.py and the data config it was trained with, or train (or resume and save) it again with "
            "this version"
        )

    def _record(self, name: str) -> Mapping[str, Any]:
        if not self.has_data_records:
            raise ValueError(f"{self.path}: {self.missing_records}")
        return self.records[name]

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the model was trained with, rebuilt from the record's model bytes (hash checked)."""
        try:
            return Tokenizer.from_record(self._record("tokenizer"))
        except ValueError as err:
            raise ValueError(f"{self.path}: {err}") from None

    def frontend_spec(self) -> dict[str, Any]:
        """The complete front-end spec of the model's features (``asr_plugin.data.build_frontend`` builds it)."""
        try:
            return complete_frontend_spec(self._record("frontend"))
        except ValueError as err:
            raise ValueError(f"{self.path}: {err}") from None

    @property
    def settings(self) -> Settings:
        """What it records of `asr_plugin.formats.base.SETTINGS`: the training module's hyper-parameters, and the
        loss node's omega. A TDT model's durations are part of its architecture (``hyper_parameters.model``)."""
        values = {key: self.hyper_parameters[key] for key in SETTINGS if key in self.hyper_parameters}
        loss = self.hyper_parameters.get("loss")
        if isinstance(loss, Mapping):
            values.update({key: loss[key] for key in LOSS_SETTINGS if loss.get(key) is not None})
        return Settings(values, source=str(self.path))
