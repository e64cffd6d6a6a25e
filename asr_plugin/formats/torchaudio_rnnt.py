"""Importer for torchaudio's ``RNNT`` (``torchaudio.models.emformer_rnnt_*``) state dicts.

What maps onto our Transducer and what does not (see docs/decoding.md, "Importing torchaudio RNN-T"):

- ``predictor.embedding`` + ``predictor.input_layer_norm`` -> ``predictor.embedding``: exact. The layer
  norm acts on one embedding row at a time, so it is folded into the table.
- ``predictor.lstm_layers.{i}`` (``x2g``, ``p2g``) -> ``predictor.lstm`` layer i: exact only when the
  source was built with ``lstm_layer_norm=False`` (same i, f, g, o gate order; ``p2g`` has no bias).
  With ``lstm_layer_norm=True`` (``emformer_rnnt_base``) the gate and cell layer norms (``g_norm``,
  ``c_norm``) sit inside the recurrence and nn.LSTM has no counterpart, so the LSTM is not imported.
- ``joiner.linear`` -> ``joint.output``: exact, provided our joint uses ReLU (torchaudio's default)
  and ``joint_dim`` equals torchaudio's ``encoding_dim``.
- Not imported: the Emformer ``transcriber`` (our encoder is a Conformer), ``predictor.linear`` and
  ``predictor.output_layer_norm`` (a layer norm after the projection that our joint lacks, so
  ``joint.predictor_proj`` cannot reproduce it), and there is nothing for ``joint.encoder_proj``.

torchaudio puts the blank last (id ``num_symbols - 1``); the blank row moves to id 0 and every other
token id k < blank becomes k + 1, so the tokenizer must number its pieces the same way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from asr_plugin.declared_shapes import check_finite
from asr_plugin.formats.base import ModelFormat, Weights
from asr_plugin.formats.torch_file import load_torch_file, peek_torch_file

log = logging.getLogger(__name__)

_LSTM_KEY = re.compile(r"predictor\.lstm_layers\.(\d+)\.(x2g|p2g|c_norm|g_norm)\.(weight|bias)")


@dataclass
class ImportResult:
    """Our state dict (keys relative to the Transducer) plus the source keys left behind and why."""

    state_dict: dict[str, torch.Tensor] = field(default_factory=dict)
    not_imported: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        reasons: dict[str, list[str]] = {}
        for key, reason in self.not_imported.items():
            reasons.setdefault(reason, []).append(key)
        lines = [f"torchaudio RNNT import: {len(self.state_dict)} tensors mapped"]
        for reason, keys in reasons.items():
            lines.append(f"  not imported ({reason}): {len(keys)} tensors, e.g. {keys[0]}")
        return "\n".join(lines)


def _blank_first(table: torch.Tensor, blank: int) -> torch.Tensor:
    """(V, ...) rows reordered so the source's blank row comes first and the others keep their order."""
    order = [blank] + [i for i in range(table.shape[0]) if i != blank]
    return table[order]


def is_torchaudio_rnnt(state: Mapping[str, torch.Tensor]) -> bool:
    """True for a torchaudio RNNT state dict (it has the joiner and the predictor's input layer norm)."""
    return "joiner.linear.weight" in state and "predictor.input_layer_norm.weight" in state


def import_torchaudio_rnnt(state: Mapping[str, torch.Tensor], blank_id: int | None = None) -> ImportResult:
    """Maps a torchaudio ``RNNT.state_dict()`` onto our Transducer's key names (see the module docstring).

    Args:
        state: the torchaudio state dict.
        blank_id: the source's blank id; None means torchaudio's convention, the last id.
    """
    if not is_torchaudio_rnnt(state):
        raise ValueError("state dict is not a torchaudio RNNT (no joiner.linear / predictor.input_layer_norm)")
    vocab = state["joiner.linear.weight"].shape[0]
    blank = vocab - 1 if blank_id is None else blank_id
    if not 0 <= blank < vocab:
        raise ValueError(f"blank_id={blank_id} outside [0, {vocab})")
    result = ImportResult()
    out = result.state_dict

    embedding = torch.nn.functional.layer_norm(
        state["predictor.embedding.weight"],
        state["predictor.embedding.weight"].shape[-1:],
        state["predictor.input_layer_norm.weight"],
        state["predictor.input_layer_norm.bias"],
    )
    out["predictor.embedding.weight"] = _blank_first(embedding, blank)
    out["joint.output.weight"] = _blank_first(state["joiner.linear.weight"], blank)
    out["joint.output.bias"] = _blank_first(state["joiner.linear.bias"], blank)

    layers = sorted({int(m.group(1)) for m in map(_LSTM_KEY.fullmatch, state) if m})
    has_norm = any(f"predictor.lstm_layers.{i}.g_norm.weight" in state for i in layers)
    for i in layers:
        if has_norm:
            continue
        x2g = state[f"predictor.lstm_layers.{i}.x2g.weight"]
        out[f"predictor.lstm.weight_ih_l{i}"] = x2g
        out[f"predictor.lstm.bias_ih_l{i}"] = state[f"predictor.lstm_layers.{i}.x2g.bias"]
        out[f"predictor.lstm.weight_hh_l{i}"] = state[f"predictor.lstm_layers.{i}.p2g.weight"]
        out[f"predictor.lstm.bias_hh_l{i}"] = torch.zeros_like(state[f"predictor.lstm_layers.{i}.x2g.bias"])

    used = {
        "predictor.embedding.weight",
        "predictor.input_layer_norm.weight",
        "predictor.input_layer_norm.bias",
        "joiner.linear.weight",
        "joiner.linear.bias",
    }
    for key in state:
        if key in used:
            continue
        if key.startswith("transcriber."):
            result.not_imported[key] = "Emformer transcriber: our encoder is a Conformer"
        elif _LSTM_KEY.fullmatch(key) and has_norm:
            result.not_imported[key] = "layer-normalised LSTM (lstm_layer_norm=True) has no nn.LSTM counterpart"
        elif key.startswith(("predictor.linear.", "predictor.output_layer_norm.")):
            result.not_imported[key] = "predictor output projection + layer norm: our joint has no layer norm there"
        elif not _LSTM_KEY.fullmatch(key):
            result.not_imported[key] = "no counterpart"
    return result


class TorchaudioRnntFormat(ModelFormat):
    """A torch file holding a torchaudio ``RNNT.state_dict()`` (`is_torchaudio_rnnt`), imported with
    `import_torchaudio_rnnt` (what is not imported is logged); its joiner computes ReLU."""

    name = "torchaudio_rnnt"
    description = "a torchaudio RNN-T state dict"

    def claims(self, path: Path) -> bool:
        obj = peek_torch_file(path) if path.is_file() else None
        return isinstance(obj, dict) and is_torchaudio_rnnt(obj)

    def read_weights(self, path: Path, blank_id: int | None = None) -> Weights:
        state = load_torch_file(path)
        if not isinstance(state, dict) or not is_torchaudio_rnnt(state):
            raise ValueError(f"{path}: format=torchaudio_rnnt but the file is not a torchaudio RNNT state dict")
        check_finite(state, str(path))
        imported = import_torchaudio_rnnt(state, blank_id)
        log.warning("%s: %s", path, imported.summary())
        return Weights(imported.state_dict, joint_activation="relu")
