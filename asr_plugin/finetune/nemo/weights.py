"""NeMo RNN-T state dict -> our Transducer's state dict, with the blank moved from last to id 0.

Key correspondence (NeMo -> ours):

- ``encoder.pre_encode.{conv,out}.*`` -> ``encoder.subsampling.{conv,out}.*`` (same layer order);
- ``encoder.layers.*`` -> ``encoder.layers.*`` (`RelPosConformerBlock` uses NeMo's sub-module names);
- ``decoder.prediction.embed.weight`` -> ``predictor.embedding.weight`` (blank row moved first);
- ``decoder.prediction.dec_rnn.lstm.*`` -> ``predictor.lstm.*``;
- ``joint.enc.*`` / ``joint.pred.*`` -> ``joint.encoder_proj.*`` / ``joint.predictor_proj.*``;
- ``joint.joint_net.<last>.*`` -> ``joint.output.*`` (blank row moved first).

NeMo's blank is the last id V-1 and its token k becomes our k + 1. The blank's embedding row is NeMo's
``padding_idx`` (all zeros), which is also NeMo's start-of-sequence input, so our predictor (blank as
the start symbol) computes the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

_RENAMES = (
    (re.compile(r"encoder\.pre_encode\.((?:conv|out)\..+)"), r"encoder.subsampling.\1"),
    (re.compile(r"encoder\.(layers\.\d+\..+)"), r"encoder.\1"),
    (re.compile(r"decoder\.prediction\.dec_rnn\.lstm\.(.+)"), r"predictor.lstm.\1"),
    (re.compile(r"joint\.enc\.(weight|bias)"), r"joint.encoder_proj.\1"),
    (re.compile(r"joint\.pred\.(weight|bias)"), r"joint.predictor_proj.\1"),
)
_EMBEDDING = "decoder.prediction.embed.weight"
_JOINT_NET = re.compile(r"joint\.joint_net\.(\d+)\.(weight|bias)")
# Source keys we knowingly leave behind, with the reason the report gives.
FRONTEND_CONSTANT = "front-end constant: NemoMelFrontend recomputes it"
_NOT_NEEDED = ((re.compile(r"preprocessor\.featurizer\.(window|fb)"), FRONTEND_CONSTANT),)


@dataclass
class NemoWeightReport:
    """Which NeMo tensors became which of ours, and which were not imported (with the reason)."""

    mapped: dict[str, str] = field(default_factory=dict)
    not_imported: dict[str, str] = field(default_factory=dict)

    @property
    def lost(self) -> dict[str, str]:
        """Not-imported tensors that carried something (everything but the front end's constants)."""
        return {key: reason for key, reason in self.not_imported.items() if reason != FRONTEND_CONSTANT}

    def summary(self) -> str:
        lines = [f"NeMo import: {len(self.mapped)} tensors mapped, {len(self.not_imported)} not imported"]
        lines += [f"  not imported: {key} ({reason})" for key, reason in sorted(self.not_imported.items())]
        return "\n".join(lines)


def blank_last_to_first(table: torch.Tensor) -> torch.Tensor:
    """(V, ...) rows in NeMo's order (blank last) -> our order (blank first, token k at k + 1)."""
    return torch.cat([table[-1:], table[:-1]])


def convert_state_dict(state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], NemoWeightReport]:
    """Our state dict (keys relative to the Transducer) from NeMo's ``EncDecRNNTBPEModel`` state dict."""
    report = NemoWeightReport()
    out: dict[str, torch.Tensor] = {}
    joint_layers = sorted({int(m.group(1)) for m in map(_JOINT_NET.fullmatch, state) if m})
    for key, value in state.items():
        target = None
        if key == _EMBEDDING:
            target, value = "predictor.embedding.weight", blank_last_to_first(value)
        elif (match := _JOINT_NET.fullmatch(key)) and int(match.group(1)) == joint_layers[-1]:
            target, value = f"joint.output.{match.group(2)}", blank_last_to_first(value)
        else:
            for pattern, replacement in _RENAMES:
                if pattern.fullmatch(key):
                    target = pattern.sub(replacement, key)
                    break
        if target is not None:
            out[target] = value
            report.mapped[key] = target
            continue
        reason = next((why for pattern, why in _NOT_NEEDED if pattern.fullmatch(key)), "no counterpart in our model")
        report.not_imported[key] = reason
    return out, report
