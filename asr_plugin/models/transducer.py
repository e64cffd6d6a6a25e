"""The transducer: encoder + predictor + joint, with the loss computed in either mode."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import torch
from torch import nn

from asr_plugin.losses import RNNT, TransducerLattice, lattice_from_record
from asr_plugin.models.encoder import ConformerEncoder
from asr_plugin.models.joint import Joint
from asr_plugin.models.predictor import LSTMPredictor

LossFn = Callable[..., torch.Tensor]


class Transducer(nn.Module):
    """Composes the three parts; the loss module decides how the joint is evaluated.

    The model never materialises the (B, T, U+1, V) lattice itself: it hands the encoder and
    predictor outputs and the joint to the loss, which runs the joint batched or sample by sample.

    The model owns its lattice (``asr_plugin.losses.RNNT`` or ``TDT``): its loss is
    ``TransducerLoss(mode, lattice=model.lattice)`` and decoding runs the lattice's greedy step. A TDT model's
    joint emits V token scores followed by ``len(lattice.durations)`` duration scores per cell, and greedy
    search skips frames by the predicted durations.

    Args:
        lattice: the transducer lattice (default ``RNNT()``); the joint's ``num_extra_outputs`` must be its.
    """

    def __init__(
        self,
        encoder: ConformerEncoder,
        predictor: LSTMPredictor,
        joint: Joint,
        lattice: TransducerLattice | None = None,
    ) -> None:
        super().__init__()
        lattice = RNNT() if lattice is None else lattice
        if not isinstance(lattice, TransducerLattice):
            raise TypeError(f"lattice must be RNNT(...) or TDT(...) (asr_plugin.losses), got {lattice!r}")
        extra = getattr(joint, "num_extra_outputs", 0)
        if lattice.num_extra_outputs != extra:
            raise ValueError(
                f"the lattice {lattice!r} needs a joint with {lattice.num_extra_outputs} extra outputs, "
                f"the joint has {extra}"
            )
        self.encoder = encoder
        self.predictor = predictor
        self.joint = joint
        self.blank_id = predictor.blank_id
        self.vocab_size = joint.vocab_size  # V token scores (a TDT joint's durations come after them)
        self.lattice = lattice

    def encode(
        self,
        features: torch.Tensor,
        feature_lengths: torch.Tensor,
        att_context_size: list[int] | tuple[int, int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T_feat, F), (B,) -> (B, T, H_e) encoder frames, (B,) int64 frame counts.

        `att_context_size`: the encoder's attention context, one of the model's (None: its default).
        """
        return self.encoder(features, feature_lengths, att_context_size)

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
    att_context_size: list | None = None,
    att_context_probs: list[float] | None = None,
    att_context_style: str = "regular",
    conv_context_size: str | list[int] | None = None,
    conv_norm_type: str = "batch_norm",
    causal_downsampling: bool = False,
    predictor_embed_dim: int = 256,
    predictor_dim: int = 320,
    predictor_layers: int = 1,
    predictor_dropout: float = 0.1,
    predictor_blank_as_pad: bool = False,
    joint_dim: int = 320,
    joint_activation: str = "tanh",
    joint_dropout: float = 0.0,
    blank_id: int = 0,
    lattice: Mapping[str, Any] | None = None,
) -> Transducer:
    """Builds a Conformer-transducer from flat sizes (what `conf/model/*.yaml` hold).

    The encoder options (``attention``, ``subsampling``, ``subsampling_channels``, ``xscaling``,
    ``encoder_bias`` = the encoder's ``bias``) are `ConformerEncoder`'s; their defaults are the original
    small model (torchaudio blocks, unpadded 64-channel subsampling). The streaming options (``att_context_size``,
    ``att_context_probs``, ``att_context_style``, ``conv_context_size``, ``conv_norm_type``,
    ``causal_downsampling``: NeMo's names) are `ConformerEncoder`'s too; their defaults are the full-context model
    (docs/streaming.md). ``predictor_blank_as_pad`` is the
    predictor's ``blank_as_pad`` (NeMo's convention: the start symbol's embedding is a zero padding row).
    ``lattice`` is the lattice's record (``asr_plugin.losses.lattice_from_record``: ``{"kind": "rnnt",
    "clamp": None, "fastemit_lambda": 0.0}``, or ``{"kind": "tdt", "durations": [0, 1, 2, 3, 4], "sigma": 0.02}``,
    whose joint gets ``len(durations)`` extra outputs; see `Transducer`); None is RNN-T.
    """
    built_lattice = RNNT() if lattice is None else lattice_from_record(lattice, "model.lattice")
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
        att_context_size=att_context_size,
        att_context_probs=att_context_probs,
        att_context_style=att_context_style,
        conv_context_size=conv_context_size,
        conv_norm_type=conv_norm_type,
        causal_downsampling=causal_downsampling,
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
    joint = Joint(
        d_model,
        predictor_dim,
        joint_dim,
        vocab_size,
        activation=joint_activation,
        dropout=joint_dropout,
        num_extra_outputs=built_lattice.num_extra_outputs,
    )
    return Transducer(encoder, predictor, joint, built_lattice)
