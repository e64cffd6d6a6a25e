"""The model-format seam: what every model file reader gives, and the one interface the entry points use.

A format is one class (`ModelFormat`) registered in `asr_plugin.formats.FORMATS`. It says whether a path is of
its kind (`ModelFormat.claims`), reads it as a whole model (`ModelFormat.read_model`: a `LoadedModel`, the model
with its tokenizer, front end and the settings the file records), as weights to fine-tune from
(`ModelFormat.read_weights`: a `Weights`), or only its settings (`ModelFormat.read_settings`), and writes a
`LoadedModel` where writing makes sense (`ModelFormat.write`). Evaluation, transcription, the exports, fine-tuning
and resuming ask the seam (`asr_plugin.formats`); no other module opens a model file.

Every reader builds only the project's own classes (the model node's allow-list, ``MODEL_TARGETS``), compares the
sizes a file declares with the weights it stores before anything of that size is allocated
(`asr_plugin.declared_shapes`), and refuses NaN or infinite weights by name, once, where it reads them.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from asr_plugin.losses import TransducerLattice
from asr_plugin.models import Transducer, build_transducer
from asr_plugin.text.tokenizer import Tokenizer

# What a file may record about how its model was trained and is decoded (`LoadedModel.settings`): the greedy
# cap its validation decoded with, the loss reductions, the auxiliary CTC weight, the SpecAugment node (None:
# none) and a TDT loss's omega. A fine-tuning run takes what its config leaves null from here.
SETTINGS = ("max_symbols_per_frame", "loss_reduction", "ctc_reduction", "ctc_weight", "spec_augment", "omega")
# Those of them that are the loss's own options (`TransducerLoss` arguments besides the lattice, which is the model's).
LOSS_SETTINGS = ("omega",)
# The greedy cap of a file that records none: NeMo's and sherpa-onnx's 10, the training module's default.
DEFAULT_MAX_SYMBOLS_PER_FRAME = 10


@dataclass
class Settings:
    """What a model file records of `SETTINGS`.

    Attributes:
        values: the recorded values (a key it records nothing for is absent).
        refused: the settings it records in a form this project cannot take, and why (a NeMo SpecAugment with
            rectangle masks): refused by `get` where one is used, so a model that is only decoded needs none.
        source: the file, for messages.
    """

    values: dict[str, Any] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def get(self, key: str, default: Any = None) -> Any:
        """The recorded value of `key`, `default` when the file records none (or None); ValueError naming the
        file when it records one this project cannot express."""
        if key in self.refused:
            raise ValueError(f"{self.source}: {self.refused[key]}")
        value = self.values.get(key)
        return default if value is None else value


@dataclass
class LoadedModel:
    """A model read from a file (or the average of several of one run), with what the file says about it.

    Attributes:
        model: the Transducer, in eval mode, its lattice among its parts (`lattice`).
        architecture: its `build_transducer` keyword arguments, ``vocab_size`` included.
        tokenizer: its tokenizer (ids with blank 0), None when the file records none (`missing`).
        frontend_spec: the complete spec of its features (``asr_plugin.data.build_frontend`` builds it), None
            when the file records none.
        settings: what the file records of `SETTINGS`.
        auxiliary_ctc: an auxiliary CTC head's state dict (``output.weight`` (V, H_e), ``output.bias``): a
            training checkpoint's head or a hybrid NeMo model's CTC decoder; None without one.
        paths: the file(s) it was read from, the one whose records it carries last.
        format: the registry name of the format that read it.
        missing: why the tokenizer and front end are absent (`require_tokenizer` says it).
    """

    model: Transducer
    architecture: dict[str, Any]
    tokenizer: Tokenizer | None = None
    frontend_spec: dict[str, Any] | None = None
    settings: Settings = field(default_factory=Settings)
    auxiliary_ctc: dict[str, torch.Tensor] | None = None
    paths: tuple[Path, ...] = ()
    format: str = ""
    missing: str = "the file records no tokenizer and front end"

    @property
    def path(self) -> Path | None:
        """The file whose records it carries (the last one of an average)."""
        return self.paths[-1] if self.paths else None

    @property
    def lattice(self) -> TransducerLattice:
        """The lattice the model was trained on and decodes (RNN-T or TDT)."""
        return self.model.lattice

    @property
    def decoding(self) -> dict[str, Any]:
        """The decoding settings its validation used, which decoding it elsewhere defaults to:
        ``max_symbols_per_frame`` (`DEFAULT_MAX_SYMBOLS_PER_FRAME` for a file that records none)."""
        return {"max_symbols_per_frame": int(self.settings.get("max_symbols_per_frame", DEFAULT_MAX_SYMBOLS_PER_FRAME))}

    @property
    def feature_dim(self) -> int:
        """F, the model's input feature size (``input_dim``, else build_transducer's default)."""
        default = inspect.signature(build_transducer).parameters["input_dim"].default
        return int(self.architecture.get("input_dim", default))

    def require_tokenizer(self) -> Tokenizer:
        """The tokenizer; ValueError naming the file and why it has none."""
        if self.tokenizer is None:
            raise ValueError(f"{self.path}: {self.missing}")
        return self.tokenizer

    def require_frontend_spec(self) -> dict[str, Any]:
        """The front-end spec; ValueError naming the file and why it has none."""
        if self.frontend_spec is None:
            raise ValueError(f"{self.path}: {self.missing}")
        return self.frontend_spec


@dataclass
class Weights:
    """What fine-tuning loads from a file.

    Attributes:
        model: the Transducer's weights, keys relative to it (``encoder.…``, ``joint.output.weight``).
        auxiliary_ctc: an auxiliary CTC head's weights (keys relative to the head), None without one.
        joint_activation: the activation the source's joint computes where its format fixes one (torchaudio's
            RNN-T: ``relu``), so a model with another one is warned about; None: the model's own.
    """

    model: dict[str, torch.Tensor]
    auxiliary_ctc: dict[str, torch.Tensor] | None = None
    joint_activation: str | None = None


class ModelFormat(ABC):
    """One model-file format. Subclasses set the attributes and register in `asr_plugin.formats.FORMATS`.

    Attributes:
        name: the registry key and ``finetune.format`` value.
        description: what its files are, for messages ("a NeMo .nemo file").
        finetune_preset: the ``+finetune=`` preset that starts a training run from one of its files.
        architecture_target: the ``model._target_`` of a training config whose architecture is read from a file
            of this format (`read_architecture`), or None.
    """

    name: str = ""
    description: str = ""
    finetune_preset: str = "from_checkpoint"
    architecture_target: str | None = None

    @abstractmethod
    def claims(self, path: Path) -> bool:
        """Whether `path` is a file (or directory) of this format; reads as little of it as it can, never fails."""

    def select(self, path: Path, avg: int = 1) -> list[Path]:
        """The files `read_model` reads for `path` and `avg` (averaging the last `avg`); one file holds one model."""
        if avg != 1:
            raise ValueError(f"avg={avg}: {path} is {self.description}, which holds one model")
        return [path]

    def read_model(self, paths: Sequence[Path], device: str | torch.device = "cpu") -> LoadedModel:
        """The model of `paths` (several: their average) with its records. This default refuses: the format
        holds weights, not the architecture, tokenizer and front end that a model needs."""
        raise ValueError(
            f"{paths[-1]} is {self.description}: it holds weights only, no architecture, tokenizer or front end, "
            f"so it cannot be decoded, evaluated or exported; fine-tune a model from it "
            f"(+finetune={self.finetune_preset} finetune.path={paths[-1]})"
        )

    @abstractmethod
    def read_weights(self, path: Path, blank_id: int | None = None) -> Weights:
        """The weights fine-tuning loads. `blank_id`: the source's blank id where the format does not record it
        (torchaudio's RNN-T: its last id when None); other formats ignore it."""

    def read_settings(self, path: Path) -> Settings:
        """What the file records of `SETTINGS` (cheap: no weights are read where the format allows); none here."""
        return Settings(source=str(path))

    def read_architecture(self, path: Path, vocab_size: int | None = None, **overrides: Any) -> dict[str, Any]:
        """The `build_transducer` keyword arguments of the file's architecture (``vocab_size`` included: the
        given one, else the file's; `overrides` replace arguments), for a training config naming
        `architecture_target`."""
        raise ValueError(f"{path}: {self.description} records no architecture a training run can take")

    def write(self, model: LoadedModel, path: Path) -> Path:
        """Writes `model` as a file of this format (atomically) and returns its path."""
        raise ValueError(f"{self.description}: this project reads these files and does not write them")
