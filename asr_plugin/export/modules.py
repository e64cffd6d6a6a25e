"""The three inference pieces of a Transducer as export-friendly modules.

The joint's projections are split off into the encoder and predictor pieces, so the joint piece is
only ``output(act(enc_proj + pred_proj))``; that is the split the search functions already use
(`project_encoder` once per frame, `project_predictor` once per new token, `combine` per step).
"""

from __future__ import annotations

import torch
from torch import nn

from asr_plugin.models import Transducer


class EncoderPiece(nn.Module):
    """(B, T, F) features, (B,) lengths -> (B, T', H_j) projected encoder frames, (B,) lengths.

    Uses `ConformerEncoder.encode_padded`: the caller (`ExportedTransducer.encode`) does the length
    check and the trim to ``max(lengths)`` that export cannot trace.
    """

    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.encoder = model.encoder
        self.project = model.joint.encoder_proj

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, out_lengths = self.encoder.encode_padded(features, lengths)  # (B, T', D)
        return self.project(x), out_lengths


class PredictorPiece(nn.Module):
    """One predictor step: (N,) tokens, (L, N, H_p) h and c -> (N, H_j) projected output, new h, c."""

    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.embedding = model.predictor.embedding
        self.lstm = model.predictor.lstm
        self.project = model.joint.predictor_proj

    def forward(
        self, tokens: torch.Tensor, h: torch.Tensor, c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h, c) = self.lstm(self.embedding(tokens)[:, None], (h, c))  # (N, 1, H_p)
        return self.project(out[:, 0]), h, c


class JointPiece(nn.Module):
    """(N, H_j) projected encoder frames and (N, H_j) projected predictor outputs -> (N, V) raw scores."""

    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.activation = model.joint.activation
        self.output = model.joint.output

    def forward(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor) -> torch.Tensor:
        return self.output(self.activation(encoder_proj + predictor_proj))
