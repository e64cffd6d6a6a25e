"""The one interface every search decodes through: a transducer's predictor step and joint, as NeMo's decoding
sees a ``decoder`` and a ``joint``.

Greedy search, beam search and streaming greedy decoding call only `DecoderJoint`; the in-memory model is
wrapped by `TransducerDecoderJoint`, and `asr_plugin.export.ExportedTransducer` implements it over its exported
programs, so both decode with the same code. `decoder_joint(model)` gives the interface of either.

The predictor state is a tuple of tensors with the hypotheses on dimension 1 (an LSTM's ``(h, c)``, each
``(L, N, H_p)``); `select_state` and `where_state` are the only operations the searches apply to it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from asr_plugin.losses import RNNT, TDT
from asr_plugin.models import Transducer

PredictorState = tuple[torch.Tensor, ...]  # hypotheses on dim 1 of every tensor


@runtime_checkable
class DecoderJoint(Protocol):
    """What a search needs from a transducer.

    Attributes:
        blank_id: the blank (and start symbol) id.
        vocab_size: V, the joint's token scores (blank included).
        durations: TDT: the durations whose D scores follow the V token scores; None for RNN-T.
        frame_dim: the size of the frames `project_frames` takes (None where it is not known).
    """

    blank_id: int
    vocab_size: int
    durations: tuple[int, ...] | None
    frame_dim: int | None

    def project_frames(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """(B, T, frame_dim) encoder frames -> (B, T, H_j) the joint's projection, computed once per frame."""
        ...

    def start(self, num: int, device: torch.device) -> tuple[torch.Tensor, PredictorState]:
        """The predictor after the start symbol for `num` hypotheses: (num, H_j) projected output, its state."""
        ...

    def predict(self, tokens: torch.Tensor, state: PredictorState) -> tuple[torch.Tensor, PredictorState]:
        """One predictor step: (N,) int64 last tokens, their state -> (N, H_j) projected output, new state."""
        ...

    def joint(self, frames: torch.Tensor, predictions: torch.Tensor) -> torch.Tensor:
        """(N, H_j) projected frames and (N, H_j) projected predictor outputs -> (N, V + D) raw scores."""
        ...


class TransducerDecoderJoint:
    """`DecoderJoint` of an in-memory `Transducer` (call ``model.eval()`` first: dropout would randomise it)."""

    def __init__(self, model: Transducer) -> None:
        self.model = model
        self.blank_id = model.blank_id
        self.vocab_size = model.vocab_size
        self.durations = lattice_durations(model.lattice)
        self.frame_dim = model.encoder.output_dim

    def project_frames(self, encoder_out: torch.Tensor) -> torch.Tensor:
        return self.model.joint.project_encoder(encoder_out)

    def start(self, num: int, device: torch.device) -> tuple[torch.Tensor, PredictorState]:
        return self.predict(torch.full((num,), self.blank_id, dtype=torch.long, device=device), None)

    def predict(self, tokens: torch.Tensor, state: PredictorState | None) -> tuple[torch.Tensor, PredictorState]:
        out, new_state = self.model.predictor.step(tokens, state)
        return self.model.joint.project_predictor(out), new_state

    def joint(self, frames: torch.Tensor, predictions: torch.Tensor) -> torch.Tensor:
        return self.model.joint.combine(frames, predictions)


def lattice_durations(lattice: object) -> tuple[int, ...] | None:
    """A TDT lattice's durations, None for RNN-T; ValueError naming any other lattice."""
    if type(lattice) is TDT:
        return tuple(lattice.durations)  # contain 0 and 1 (the lattice checks it)
    if type(lattice) is RNNT:
        return None
    raise ValueError(f"decoding knows the lattices RNNT and TDT, not {lattice!r}")


def decoder_joint(model: Transducer | DecoderJoint) -> DecoderJoint:
    """The decoding interface of `model`: a `Transducer` wrapped, a `DecoderJoint` (an exported model) itself."""
    if isinstance(model, Transducer):
        return TransducerDecoderJoint(model)
    if isinstance(model, DecoderJoint):
        return model
    raise TypeError(f"cannot decode a {type(model).__name__}: give a Transducer or a DecoderJoint")


def select_state(state: PredictorState, index: torch.Tensor) -> PredictorState:
    """The hypotheses `index` ((K,) int64) of a state."""
    return tuple(part[:, index] for part in state)


def where_state(mask: torch.Tensor, new: PredictorState, old: PredictorState) -> PredictorState:
    """Per hypothesis ((N,) bool `mask`): `new`'s state where True, `old`'s elsewhere."""
    return tuple(torch.where(mask.view(1, -1, *([1] * (n.dim() - 2))), n, o) for n, o in zip(new, old))
