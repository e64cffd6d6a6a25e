"""Model formats: every model file the project reads or writes, each one class (see `base.ModelFormat`).

Evaluation, transcription, the exports, fine-tuning and resuming ask here; no other module opens a model file:

    loaded = read_model("run/checkpoints", avg=5)      # a LoadedModel: model, tokenizer, front end, settings
    loaded = read_model("parakeet-tdt-0.6b-v2.nemo")   # any format that holds a whole model
    weights = read_weights("pretrained.pt")            # what fine-tuning loads, from any format
    export_nemo("run/checkpoints/last.ckpt", "finetuned.nemo")  # back to NeMo

A new format is one file (a `ModelFormat` subclass) and one line in `FORMATS`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from asr_plugin.config_nodes import TARGET, ConfigError
from asr_plugin.formats.base import LOSS_SETTINGS, SETTINGS, LoadedModel, ModelFormat, Settings, Weights
from asr_plugin.formats.checkpoint import (
    BUILD_TRANSDUCER,
    LightningCheckpointFormat,
    check_finite_optimizer_state,
    model_node,
    read_checkpoint,
)
from asr_plugin.formats.nemo import NemoFormat, NemoImport, write_nemo
from asr_plugin.formats.nemo.writer import check_nemo_output
from asr_plugin.formats.state_dict import StateDictFormat
from asr_plugin.formats.torchaudio_rnnt import TorchaudioRnntFormat
from asr_plugin.formats.transformers_parakeet import TransformersParakeetFormat

# format name -> its class: the only list of formats (a new format adds its line here). `format_of` asks them in
# this order: the more particular kinds of torch file before the plain state dict.
FORMATS: dict[str, type[ModelFormat]] = {
    fmt.name: fmt
    for fmt in (
        NemoFormat,
        TransformersParakeetFormat,
        TorchaudioRnntFormat,
        LightningCheckpointFormat,
        StateDictFormat,
    )
}
AUTO = "auto"


def format_of(path: str | os.PathLike, format: str = AUTO) -> ModelFormat:
    """The format of `path`: the one named (a key of `FORMATS`), or with "auto" the first that claims the file.
    FileNotFoundError for a missing path, ValueError naming the file when no format claims it."""
    if format != AUTO:
        if format not in FORMATS:
            raise ValueError(f"format={format!r}: choose one of {[AUTO, *FORMATS]}")
        return FORMATS[format]()
    path = Path(path)
    if not path.exists():
        where = "" if path.is_absolute() else f" (relative to the current directory {Path.cwd()})"
        raise FileNotFoundError(f"model file {path} does not exist{where}")
    for fmt in FORMATS.values():
        if fmt().claims(path):
            return fmt()
    kinds = "; ".join(f"{name}: {fmt.description}" for name, fmt in FORMATS.items())
    raise ValueError(f"{path}: not a model file of a format this project reads ({kinds})")


def model_files(path: str | os.PathLike, avg: int = 1, format: str = AUTO) -> list[Path]:
    """The file(s) `read_model` reads for `path` and `avg`: the file itself; for training checkpoints the last
    `avg` of a directory, or a file and the `avg - 1` before it in its directory
    (`asr_plugin.formats.checkpoint.select_checkpoints`); a format holding one model per file refuses `avg` > 1."""
    if avg < 1:
        raise ValueError(f"avg={avg} must be >= 1")
    return format_of(path, format).select(Path(path), avg)


def read_model(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    avg: int = 1,
    format: str = AUTO,
    device: str | torch.device = "cpu",
) -> LoadedModel:
    """The model of `source` (a file, a directory of checkpoints, or the files `model_files` chose), averaged
    over `avg` checkpoints of a directory, with its tokenizer, front end and settings; in eval mode on `device`.
    ValueError naming the file for a format that holds no whole model (a state dict: fine-tune from it)."""
    if isinstance(source, (str, os.PathLike)):
        paths = model_files(source, avg, format)
    else:
        paths = [Path(path) for path in source]
        if not paths:
            raise ValueError("read_model: no model file given")
    return format_of(paths[-1], format).read_model(paths, device)


def read_weights(path: str | os.PathLike, format: str = AUTO, blank_id: int | None = None) -> Weights:
    """The weights fine-tuning loads from `path` (any format; `blank_id`: `ModelFormat.read_weights`)."""
    return format_of(path, format).read_weights(Path(path), blank_id)


def export_nemo(source: str | os.PathLike | LoadedModel | NemoImport, path: str | os.PathLike) -> Path:
    """Writes `source` (a model file `read_model` reads: a training checkpoint or a directory of them, a
    ``.nemo``; what `import_nemo` returned; or a `LoadedModel`) as the NeMo 3.0 ``.nemo`` file `path` that
    ``ASRModel.restore_from`` loads (atomically; `asr_plugin.formats.nemo.write_nemo`)."""
    check_nemo_output(path, [source] if isinstance(source, (str, os.PathLike)) else ())  # before anything is read
    if isinstance(source, (str, os.PathLike)):
        source = read_model(source)
    return write_nemo(source, path)


def read_settings(path: str | os.PathLike, format: str = AUTO) -> Settings:
    """What the file records of `SETTINGS` (none for a format that records none)."""
    return format_of(path, format).read_settings(Path(path))


def read_resumable_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The training checkpoint `path` for resuming a run (`asr_plugin.formats.checkpoint.read_checkpoint`: content
    hash and finite weights checked; and its optimizer state finite). A model file of another format is refused naming the fine-tuning preset
    that starts a run from it: resuming continues a run of this recipe, with its optimizer and step."""
    path = Path(path)
    other = next(
        (fmt() for fmt in FORMATS.values() if fmt is not LightningCheckpointFormat and fmt().claims(path)), None
    )
    if other is not None:
        raise ValueError(
            f"{path} is {other.description}, not a training checkpoint: resuming continues a run of this recipe "
            f"from its own checkpoint; start a run from this file with +finetune={other.finetune_preset} "
            f"finetune.path={path}"
        )
    checkpoint = read_checkpoint(path)
    check_finite_optimizer_state(checkpoint, path)
    return checkpoint


def architecture_format(node: Mapping[str, Any]) -> ModelFormat | None:
    """The format whose file a training config's model node takes its architecture from (its ``_target_`` is
    the format's ``architecture_target``, e.g. conf/model/nemo.yaml), or None for ``build_transducer``
    arguments. ConfigError naming ``model._target_`` for any other target."""
    target = node.get(TARGET)
    if target == BUILD_TRANSDUCER:
        return None
    readers = {fmt.architecture_target: fmt for fmt in FORMATS.values() if fmt.architecture_target}
    if target not in readers:
        raise ConfigError(f"model._target_={target!r}: the model is built by one of {[BUILD_TRANSDUCER, *readers]}")
    return readers[target]()


def architecture_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """The model node a checkpoint stores for a training config's model node: plain ``build_transducer``
    arguments, never a reference to another file (a file's architecture is read here, once)."""
    arguments = {key: value for key, value in node.items() if key != TARGET}
    fmt = architecture_format(node)
    if fmt is not None:
        arguments = fmt.read_architecture(Path(arguments.pop("path")), **arguments)
    return model_node(arguments)


__all__ = [
    "AUTO",
    "FORMATS",
    "LOSS_SETTINGS",
    "SETTINGS",
    "LoadedModel",
    "ModelFormat",
    "Settings",
    "Weights",
    "architecture_format",
    "architecture_node",
    "export_nemo",
    "model_files",
    "format_of",
    "read_model",
    "read_resumable_checkpoint",
    "read_settings",
    "read_weights",
]
