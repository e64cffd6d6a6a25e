"""NeMo transducer state dict <-> our Transducer's state dict, the blank moved between NeMo's last id and our 0.

Key correspondence (NeMo <-> ours, `PREFIXES`):

- ``encoder.pre_encode.{conv,out}.*`` <-> ``encoder.subsampling.{conv,out}.*`` (same layer order);
- ``encoder.layers.*`` <-> ``encoder.layers.*`` (`RelPosConformerBlock` uses NeMo's sub-module names);
- ``decoder.prediction.embed.weight`` <-> ``predictor.embedding.weight`` (blank row moved);
- ``decoder.prediction.dec_rnn.lstm.*`` <-> ``predictor.lstm.*``;
- ``joint.enc.*`` / ``joint.pred.*`` <-> ``joint.encoder_proj.*`` / ``joint.predictor_proj.*``;
- ``joint.joint_net.<last>.*`` <-> ``joint.output.*`` (blank row moved; a TDT joint's D duration rows after
  the token rows stay where they are);
- a hybrid model's ``ctc_decoder.decoder_layers.0.*`` (a kernel-1 convolution) <-> the auxiliary CTC head
  ``output.*`` (`AUXILIARY_CTC_PREFIX`; blank row moved), kept apart from the transducer's weights.

NeMo's blank is the last token id and its token k becomes our k + 1. The blank's embedding row is NeMo's
``padding_idx`` (all zeros), which is also NeMo's start-of-sequence input, so our predictor (blank as the
start symbol) computes the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

# (NeMo prefix, our prefix) of the tensors that keep their layout.
PREFIXES = (
    ("encoder.pre_encode.", "encoder.subsampling."),
    ("encoder.layers.", "encoder.layers."),
    ("decoder.prediction.dec_rnn.lstm.", "predictor.lstm."),
    ("joint.enc.", "joint.encoder_proj."),
    ("joint.pred.", "joint.predictor_proj."),
)
EMBEDDING = ("decoder.prediction.embed.weight", "predictor.embedding.weight")
JOINT_NET = re.compile(r"joint\.joint_net\.(\d+)\.(weight|bias)")
CTC_DECODER = re.compile(r"ctc_decoder\.decoder_layers\.0\.(weight|bias)")
AUXILIARY_CTC_PREFIX = "auxiliary_ctc."  # our CTC head's keys in `convert_state_dict`'s output
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


def blank_last_to_first(table: torch.Tensor, num_tokens: int | None = None) -> torch.Tensor:
    """(V [+ D], ...) rows in NeMo's order (blank = row V - 1) -> ours (blank first, token k at k + 1).

    `num_tokens` = V when D extra rows (a TDT joint's durations) follow the tokens; None: every row is a token.
    """
    tokens = table.shape[0] if num_tokens is None else num_tokens
    return torch.cat([table[tokens - 1 : tokens], table[: tokens - 1], table[tokens:]])


def blank_first_to_last(table: torch.Tensor, num_tokens: int | None = None) -> torch.Tensor:
    """The inverse of `blank_last_to_first`: our row order -> NeMo's."""
    tokens = table.shape[0] if num_tokens is None else num_tokens
    return torch.cat([table[1:tokens], table[:1], table[tokens:]])


def convert_state_dict(
    state: Mapping[str, torch.Tensor], num_extra_outputs: int = 0
) -> tuple[dict[str, torch.Tensor], NemoWeightReport]:
    """Our state dict (keys relative to the Transducer; a hybrid's CTC head under `AUXILIARY_CTC_PREFIX`) from
    a NeMo transducer's state dict. `num_extra_outputs`: D duration rows at the end of a TDT joint's output."""
    report = NemoWeightReport()
    out: dict[str, torch.Tensor] = {}
    joint_layers = sorted({int(m.group(1)) for m in map(JOINT_NET.fullmatch, state) if m})
    for key, value in state.items():
        target = None
        if key == EMBEDDING[0]:
            target, value = EMBEDDING[1], blank_last_to_first(value)
        elif (match := JOINT_NET.fullmatch(key)) and int(match.group(1)) == joint_layers[-1]:
            target = f"joint.output.{match.group(2)}"
            value = blank_last_to_first(value, value.shape[0] - num_extra_outputs)
        elif match := CTC_DECODER.fullmatch(key):
            weight = value.squeeze(-1) if match.group(1) == "weight" else value  # (V, H, 1) -> (V, H)
            target, value = f"{AUXILIARY_CTC_PREFIX}output.{match.group(1)}", blank_last_to_first(weight)
        else:
            for nemo_prefix, our_prefix in PREFIXES:
                if key.startswith(nemo_prefix):
                    target = our_prefix + key[len(nemo_prefix) :]
                    break
        if target is not None:
            out[target] = value
            report.mapped[key] = target
            continue
        reason = next((why for pattern, why in _NOT_NEEDED if pattern.fullmatch(key)), "no counterpart in our model")
        report.not_imported[key] = reason
    return out, report


def to_nemo_state_dict(
    state: Mapping[str, torch.Tensor],
    joint_output_index: int,
    num_extra_outputs: int = 0,
    auxiliary_ctc: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """NeMo's state dict (without the preprocessor's buffers) for our Transducer's `state`: the inverse of
    `convert_state_dict`.

    Args:
        joint_output_index: the output layer's index in NeMo's ``joint.joint_net`` (2 after an activation
            and a dropout, 1 without dropout).
        num_extra_outputs: D duration rows after the tokens of a TDT joint's output.
        auxiliary_ctc: the state dict of our CTC head (``output.weight``, ``output.bias``): a hybrid model's
            ``ctc_decoder``.
    """
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key == EMBEDDING[1]:
            out[EMBEDDING[0]] = blank_first_to_last(value)
        elif key.startswith("joint.output."):
            tokens = value.shape[0] - num_extra_outputs
            out[f"joint.joint_net.{joint_output_index}.{key.rsplit('.', 1)[1]}"] = blank_first_to_last(value, tokens)
        else:
            prefix = next(((n, o) for n, o in PREFIXES if key.startswith(o)), None)
            if prefix is None:
                raise ValueError(f"model weight {key} has no counterpart in NeMo's transducer")
            out[prefix[0] + key[len(prefix[1]) :]] = value
    for name, value in (auxiliary_ctc or {}).items():
        kind = name.rsplit(".", 1)[1]
        value = blank_first_to_last(value)
        out[f"ctc_decoder.decoder_layers.0.{kind}"] = value.unsqueeze(-1) if kind == "weight" else value
    return out
