"""The transducer: encoder + predictor + joint, with the loss computed in either mode."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from asr_plugin.models.encoder import ConformerEncoder
from asr_plugin.models.joint import Joint
from asr_plugin.models.predictor import LSTMPredictor

LossFn = Callable[..., torch.Tensor]


class Transducer(nn.Module):
    """Composes the three parts; the loss module decides how the joint is evaluated.

    The model never materialises the (B, T, U+1, V) lattice itself: it hands the encoder and
    predictor outputs and the joint to the loss, which runs the joint batched or sample by sample.
    """

    def __init__(self, encoder: ConformerEncoder, predictor: LSTMPredictor, joint: Joint) -> None:
        super().__init__()
        self.encoder = encoder
        self.predictor = predictor
        self.joint = joint
        self.blank_id = predictor.blank_id
        self.vocab_size = joint.vocab_size

    def encode(self, features: torch.Tensor, feature_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T_feat, F), (B,) -> (B, T, H_e) encoder frames, (B,) int64 frame counts."""
        return self.encoder(features, feature_lengths)

    def forward(
        self,
        features: torch.Tensor,
        feature_lengths: torch.Tensor,
        targets: torch.Tensor,
        target_lengths: torch.Tensor,
        loss_fn: LossFn,
    ) -> torch.Tensor:
        """Transducer loss of a batch.

        Args:
            features: (B, T_feat, F) float log-mel features.
            feature_lengths: (B,) int64.
            targets: (B, U) int64 label ids, 0-padded.
            target_lengths: (B,) int64.
            loss_fn: ``asr_plugin.losses.TransducerLoss`` (or anything with its call signature
                ``(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths)``).
        Returns:
            the loss as reduced by ``loss_fn``.
        """
        encoder_out, encoder_lengths = self.encode(features, feature_lengths)  # (B, T, H_e)
        return self.loss_from_encoder(encoder_out, encoder_lengths, targets, target_lengths, loss_fn)

    def loss_from_encoder(
        self,
        encoder_out: torch.Tensor,
        encoder_lengths: torch.Tensor,
        targets: torch.Tensor,
        target_lengths: torch.Tensor,
        loss_fn: LossFn,
    ) -> torch.Tensor:
        """The loss from already computed (B, T, H_e) encoder frames (evaluation reuses them to decode).

        `targets` (B, U) are used at their padded width U (the collate pads to the longest; trimming to
        ``target_lengths.max()`` here would read that device tensor on the host every step).
        """
        predictor_out = self.predictor(targets)  # (B, U+1, H_p)
        return loss_fn(encoder_out, predictor_out, self.joint, targets, encoder_lengths, target_lengths)


def build_transducer(
    vocab_size: int,
    input_dim: int = 80,
    d_model: int = 144,
    num_layers: int = 4,
    num_heads: int = 4,
    ffn_dim: int = 576,
    conv_kernel_size: int = 31,
    subsampling_factor: int = 4,
    dropout: float = 0.1,
    attention: str = "mha",
    subsampling: str = "conv2d",
    subsampling_channels: int | None = None,
    xscaling: bool = False,
    encoder_bias: bool = True,
    predictor_embed_dim: int = 256,
    predictor_dim: int = 320,
    predictor_layers: int = 1,
    predictor_dropout: float = 0.1,
    joint_dim: int = 320,
    joint_activation: str = "tanh",
    joint_dropout: float = 0.0,
    blank_id: int = 0,
) -> Transducer:
    """Builds a Conformer-transducer from flat sizes (what `conf/model/*.yaml` hold).

    The encoder options (``attention``, ``subsampling``, ``subsampling_channels``, ``xscaling``,
    ``encoder_bias`` = the encoder's ``bias``) are `ConformerEncoder`'s; their defaults are the original
    small model (torchaudio blocks, unpadded 64-channel subsampling).
    """
    encoder = ConformerEncoder(
        input_dim=input_dim,
        d_model=d_model,
        num_layers=num_layers,
        num_heads=num_heads,
        ffn_dim=ffn_dim,
        conv_kernel_size=conv_kernel_size,
        dropout=dropout,
        subsampling_factor=subsampling_factor,
        attention=attention,
        subsampling=subsampling,
        subsampling_channels=subsampling_channels,
        xscaling=xscaling,
        bias=encoder_bias,
    )
    predictor = LSTMPredictor(
        vocab_size,
        embed_dim=predictor_embed_dim,
        hidden_dim=predictor_dim,
        num_layers=predictor_layers,
        dropout=predictor_dropout,
        blank_id=blank_id,
    )
    joint = Joint(d_model, predictor_dim, joint_dim, vocab_size, activation=joint_activation, dropout=joint_dropout)
    return Transducer(encoder, predictor, joint)
