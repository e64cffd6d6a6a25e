"""Runs exported pieces through the same search code as the eager model."""

from __future__ import annotations

import os

import torch
from torch import nn

from asr_plugin.decoding.interface import lattice_durations
from asr_plugin.export.programs import (
    METADATA_FILE,
    ExportMetadata,
    export_pieces,
    load_pieces,
)
from asr_plugin.losses import lattice_from_record
from asr_plugin.models import Transducer


class ExportedTransducer:
    """The exported programs as a model to decode: ``encode`` and the searches' interface
    (`asr_plugin.decoding.DecoderJoint`: ``project_frames``, ``start``, ``predict``, ``joint``, ``blank_id``,
    ``vocab_size``, ``durations``, ``frame_dim``).

    ``greedy_search(exported, *exported.encode(features, lengths))`` gives the eager model's tokens. The encoder
    and predictor programs already apply the joint's projections, so `project_frames` is the identity.
    """

    def __init__(self, pieces: dict[str, nn.Module], meta: ExportMetadata) -> None:
        self._encoder = pieces["encoder"]
        self._predictor = pieces["predictor"]
        self._joint = pieces["joint"]
        self.meta = meta
        self.blank_id = meta.blank_id
        self.vocab_size = meta.vocab_size
        self.frame_dim = meta.joint_dim  # encode() gives projected frames
        # the exported checkpoint's greedy cap (None when the export does not record one): greedy_search's
        # max_symbols_per_frame for the transcripts eval.py gives
        self.max_symbols_per_frame = meta.max_symbols_per_frame
        self.lattice = lattice_from_record(meta.lattice, f"{METADATA_FILE}: lattice")
        self.durations = lattice_durations(self.lattice)

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

    @staticmethod
    def project_frames(encoder_out: torch.Tensor) -> torch.Tensor:
        """The encoder program's frames are already projected."""
        return encoder_out

    def start(self, num: int, device: torch.device) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """The predictor program after the start symbol for `num` hypotheses (zero LSTM state)."""
        zeros = torch.zeros(self.meta.predictor_layers, num, self.meta.predictor_dim, device=device)
        blank = torch.full((num,), self.blank_id, dtype=torch.long, device=device)
        return self.predict(blank, (zeros, zeros.clone()))

    def predict(
        self, tokens: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """(N,) tokens, (h, c) -> (N, H_j) projected output, new (h, c)."""
        out, h, c = self._predictor(tokens, *state)
        return out, (h, c)

    def joint(self, frames: torch.Tensor, predictions: torch.Tensor) -> torch.Tensor:
        """(N, H_j) each -> (N, V + D) raw scores."""
        return self._joint(frames, predictions)
