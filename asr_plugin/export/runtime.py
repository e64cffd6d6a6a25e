"""Runs exported pieces through the same search code as the eager model."""

from __future__ import annotations

import os

import torch
from torch import nn

from asr_plugin.export.programs import (
    METADATA_FILE,
    ExportMetadata,
    export_pieces,
    load_pieces,
)
from asr_plugin.losses import lattice_from_record
from asr_plugin.models import LSTMPredictor, LSTMState, Transducer


class _Predictor:
    """`LSTMPredictor`'s decoding interface over the exported predictor step (outputs are already projected)."""

    select_state = staticmethod(LSTMPredictor.select_state)

    def __init__(self, step: nn.Module, meta: ExportMetadata) -> None:
        self._step = step
        self.meta = meta
        self.blank_id = meta.blank_id

    def initial_state(
        self, batch_size: int, device: torch.device | str, dtype: torch.dtype = torch.float32
    ) -> LSTMState:
        zeros = torch.zeros(self.meta.predictor_layers, batch_size, self.meta.predictor_dim, device=device, dtype=dtype)
        return zeros, zeros.clone()

    def step(self, tokens: torch.Tensor, state: LSTMState | None = None) -> tuple[torch.Tensor, LSTMState]:
        """(N,) tokens, state -> (N, H_j) projected output, new state."""
        if state is None:
            state = self.initial_state(tokens.shape[0], tokens.device)
        out, h, c = self._step(tokens, *state)
        return out, (h, c)


class _Joint:
    """`Joint`'s decoding interface: projections already happened in the encoder and predictor pieces."""

    def __init__(self, combine: nn.Module) -> None:
        self._combine = combine

    @staticmethod
    def project_encoder(encoder_proj: torch.Tensor) -> torch.Tensor:
        return encoder_proj

    @staticmethod
    def project_predictor(predictor_proj: torch.Tensor) -> torch.Tensor:
        return predictor_proj

    def combine(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor) -> torch.Tensor:
        """(..., H_j) each (broadcast) -> (..., V) raw scores; the program takes flat (N, H_j) rows."""
        enc, pred = torch.broadcast_tensors(encoder_proj, predictor_proj)
        flat = self._combine(enc.reshape(-1, enc.shape[-1]), pred.reshape(-1, pred.shape[-1]))  # (N, V)
        return flat.reshape(*enc.shape[:-1], flat.shape[-1])


class ExportedTransducer:
    """Duck-types `Transducer` for decoding: ``encode``, ``predictor``, ``joint``, ``blank_id``, ``vocab_size``,
    ``lattice``.

    ``greedy_search(exported, *exported.encode(features, lengths))`` gives the eager model's tokens.
    """

    def __init__(self, pieces: dict[str, nn.Module], meta: ExportMetadata) -> None:
        self._encoder = pieces["encoder"]
        self.predictor = _Predictor(pieces["predictor"], meta)
        self.joint = _Joint(pieces["joint"])
        self.meta = meta
        self.blank_id = meta.blank_id
        self.vocab_size = meta.vocab_size
        # the exported checkpoint's greedy cap (None when the export does not record one): greedy_search's
        # max_symbols_per_frame for the transcripts eval.py gives
        self.max_symbols_per_frame = meta.max_symbols_per_frame
        self.lattice = lattice_from_record(meta.lattice, f"{METADATA_FILE}: lattice")

    @classmethod
    def from_model(
        cls, model: Transducer, feature_dim: int, max_symbols_per_frame: int | None = None
    ) -> "ExportedTransducer":
        """Exports `model` in memory (no files)."""
        programs, meta = export_pieces(model, feature_dim, max_symbols_per_frame)
        return cls({name: program.module() for name, program in programs.items()}, meta)

    @classmethod
    def load(cls, export_dir: str | os.PathLike) -> "ExportedTransducer":
        """Loads a directory written by `export_transducer`."""
        return cls(*load_pieces(export_dir))

    def encode(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F), (B,) -> (B, T', H_j) projected frames, (B,) lengths; trims to max(lengths) like the eager encoder."""
        too_short = lengths < self.meta.min_feature_frames
        if bool(too_short.any()):
            index = int(too_short.nonzero()[0])
            raise ValueError(
                f"utterance {index} has {int(lengths[index])} feature frames; the encoder needs "
                f"at least {self.meta.min_feature_frames}"
            )
        return self._encoder(features[:, : int(lengths.max())], lengths)
