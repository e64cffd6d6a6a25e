"""The transducer: encoder + predictor + joint, with the loss computed in either mode."""

from __future__ import annotations

from collections.abc import Sequence
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

    A TDT model (token-and-duration transducer, ``durations`` given) has a joint that emits V token scores
    followed by ``len(durations)`` duration scores per cell; its loss is ``TransducerLoss(durations=...)``
    and greedy search skips frames by the predicted durations.

    Args:
        durations: the TDT durations in frames (sorted, containing 0 and 1), None for RNN-T.
    """

    def __init__(self, encoder: ConformerEncoder, predictor: LSTMPredictor, joint: Joint,
                 durations: Sequence[int] | None = None) -> None:
        super().__init__()
        extra = getattr(joint, "num_extra_outputs", 0)
        if durations is not None and (len(set(durations)) != len(durations) or min(durations, default=-1) < 0):
            raise ValueError(f"durations={list(durations)} must be distinct frame counts >= 0")
        if len(durations or ()) != extra:
            raise ValueError(f"durations={durations} needs a joint with {len(durations or ())} extra outputs, the "
                             f"joint has {extra}")
        self.encoder = encoder
        self.predictor = predictor
        self.joint = joint
        self.blank_id = predictor.blank_id
        self.vocab_size = joint.vocab_size  # V token scores (a TDT joint's durations come after them)
        self.durations = tuple(int(d) for d in durations) if durations else None

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
    predictor_blank_as_pad: bool = False,
    joint_dim: int = 320,
    joint_activation: str = "tanh",
    joint_dropout: float = 0.0,
    blank_id: int = 0,
    durations: list[int] | None = None,
) -> Transducer:
    """Builds a Conformer-transducer from flat sizes (what `conf/model/*.yaml` hold).

    The encoder options (``attention``, ``subsampling``, ``subsampling_channels``, ``xscaling``,
    ``encoder_bias`` = the encoder's ``bias``) are `ConformerEncoder`'s; their defaults are the original
    small model (torchaudio blocks, unpadded 64-channel subsampling). ``predictor_blank_as_pad`` is the
    predictor's ``blank_as_pad`` (NeMo's convention: the start symbol's embedding is a zero padding row).
    ``durations`` makes a TDT model (the joint gets ``len(durations)`` extra outputs; see `Transducer`).
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
        blank_as_pad=predictor_blank_as_pad,
    )
    joint = Joint(d_model, predictor_dim, joint_dim, vocab_size, activation=joint_activation, dropout=joint_dropout,
                  num_extra_outputs=len(durations or ()))
    return Transducer(encoder, predictor, joint, durations)
