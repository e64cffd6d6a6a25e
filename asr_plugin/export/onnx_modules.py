"""A Transducer's three pieces in the tensor layout of sherpa-onnx's NeMo transducer (``model_type="nemo_transducer"``).

sherpa-onnx (``offline-transducer-nemo-model.cc`` and its greedy/beam decoders) calls them as NeMo's own
ONNX export lays them out, channels before time:

- encoder: (B, F, T) float features, (B,) int64 frames -> (B, H, T') frames, (B,) int64 frames;
- decoder: (B, 1) int32 token, (B,) int32 its length, (L, B, H_p) h and c -> (B, H, 1) output, (B,) int32
  length, next h and c (the LSTM's states as inputs and outputs; sherpa starts them at zeros);
- joiner: (B, H, 1) one encoder frame and (B, H, 1) one decoder output -> (B, 1, 1, V [+ D]) raw scores.

sherpa's token ids are NeMo's: the blank is the last id, V - 1. This project's blank is 0, so the decoder maps
sherpa's id s to ours (s + 1) mod V and the joiner reorders its V token scores into sherpa's order (ours
1..V-1, then blank); a TDT joint's duration scores follow unchanged. The joint's projections are moved into
the encoder and the decoder (H = the joint's hidden size), so the joiner only adds, applies the activation
and the output layer. The encoder starts with `encoder_input`'s module: `SherpaFeatures` (a layout change) for a
model trained on sherpa's features, `SherpaFeatureAdapter` (sherpa's features -> the training front end's) for
any other.
"""

from __future__ import annotations

import torch
from torch import nn

from asr_plugin.export.feature_adapter import SherpaFeatureAdapter, SherpaFeatures
from asr_plugin.models import Transducer


def sherpa_order(vocab_size: int) -> torch.Tensor:
    """(V,) int64: our token id at each sherpa id (sherpa id s <- our s + 1; sherpa's last id <- our blank 0)."""
    return (torch.arange(vocab_size) + 1) % vocab_size


class SherpaEncoder(nn.Module):
    """(B, F_s, T) sherpa's features, (B,) int64 frames -> (B, H_j, T') projected encoder frames, (B,) frames."""

    def __init__(self, model: Transducer, adapter: SherpaFeatures | SherpaFeatureAdapter) -> None:
        super().__init__()
        self.adapter = adapter
        self.encoder = model.encoder
        self.project = model.joint.encoder_proj

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.adapter(features, lengths)  # (B, T, F)
        x, out_lengths = self.encoder.encode_padded(x, lengths)  # (B, T', D)
        return self.project(x).transpose(1, 2), out_lengths


class SherpaDecoder(nn.Module):
    """One predictor step on sherpa's ids: (B, 1) int32 tokens, (B,) int32 lengths, (L, B, H_p) h and c ->
    (B, H_j, 1) projected output, (B,) lengths, new h and c."""

    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.embedding = model.predictor.embedding
        self.lstm = model.predictor.lstm
        self.project = model.joint.predictor_proj
        self.register_buffer("ours", sherpa_order(model.vocab_size))

    def forward(
        self, targets: torch.Tensor, target_length: torch.Tensor, h: torch.Tensor, c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        tokens = self.ours[targets.long()]  # (B, 1) our ids
        out, (h, c) = self.lstm(self.embedding(tokens), (h, c))  # (B, 1, H_p)
        return self.project(out).transpose(1, 2), target_length, h, c


class SherpaJoiner(nn.Module):
    """(B, H_j, 1) projected encoder frame, (B, H_j, 1) projected decoder output -> (B, 1, 1, V + D) raw scores,
    tokens in sherpa's order (blank last), then the durations."""

    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.activation = model.joint.activation
        self.output = model.joint.output
        vocab = model.vocab_size
        order = torch.cat([sherpa_order(vocab), torch.arange(vocab, model.joint.output.out_features)])
        self.register_buffer("order", order)

    def forward(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        hidden = self.activation(encoder_out.transpose(1, 2) + decoder_out.transpose(1, 2))  # (B, 1, H_j)
        scores = self.output(hidden)[..., self.order]  # (B, 1, V + D)
        return scores.unsqueeze(1)
