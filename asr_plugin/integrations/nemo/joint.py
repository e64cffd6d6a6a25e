"""``SampleWiseRNNTJoint``: NeMo's RNNTJoint whose fused loss path computes the transducer loss sample-wise.

NeMo's fused path (``fuse_loss_wer: true``) loops over sub-batches of ``fused_batch_size`` samples, but runs the
joint and the loss of every sub-batch before the one backward, so every sub-batch's (b, T, U+1, V) scores,
activations and loss gradient stay alive until then: memory still grows with the batch. Here the loss is this
project's sample-wise loss (``asr_plugin.losses``) on NeMo's own joint network: the joint, the loss and their
gradients run group by group within ``memory_budget``, and the (B, T, U+1, V) scores never exist.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from nemo.collections.asr.modules import RNNTJoint
from nemo.core.classes import typecheck

from asr_plugin.losses import SamplewiseOptions, TransducerLoss

from .network import JointNetwork
from .objective import LossSettings, loss_settings

TARGET = "asr_plugin.integrations.nemo.SampleWiseRNNTJoint"  # what a NeMo config's model.joint._target_ names


def allow_in_nemo_configs() -> None:
    """Let NeMo instantiate ``SampleWiseRNNTJoint`` from a config's ``_target_`` (training configs, and `.nemo`
    files saved from such a model).

    NeMo 3.0 instantiates only targets under the prefixes in ``nemo.core.classes.common.ALLOWED_TARGET_PREFIXES``
    and has no API to extend that list; this adds exactly this class's path to it, for this process.
    """
    from nemo.core.classes import common

    if TARGET not in common.ALLOWED_TARGET_PREFIXES:
        common.ALLOWED_TARGET_PREFIXES.append(TARGET)


class SampleWiseRNNTJoint(RNNTJoint):
    """NeMo's ``RNNTJoint`` computing the fused path's loss with the sample-wise transducer loss.

    Everything but the fused path's loss is NeMo's: the joint network and its weights (state dicts are
    interchangeable with ``RNNTJoint``'s), unfused calls (inference, decoding, export), the loss's reduction
    (``rnnt_reduction``, NeMo's ``RNNTLoss.reduce``) and the training/validation WER (decoded in sub-batches of
    ``fused_batch_size``, which therefore stays required with ``fuse_loss_wer`` as in NeMo). The loss equals
    NeMo's RNN-T or TDT loss on the same joint (``asr_plugin.integrations.nemo.objective`` lists the NeMo losses
    and options it computes and those it refuses).

    Args:
        memory_budget: bytes or a string like "512MiB" bounding the loss's transient memory per step (None:
            1 GiB on CUDA, 256 MiB on CPU), as in ``asr_plugin.losses.TransducerLoss``.
        max_samples_per_group: at most this many samples per loss step (None: as many as fit the budget).
        fuse_loss_wer: True (the default here) to compute the loss in ``forward`` as NeMo's fused path does;
            False makes this class NeMo's ``RNNTJoint``.
        jointnet, num_classes, fused_batch_size and the other arguments: NeMo's ``RNNTJoint``'s.
    """

    def __init__(
        self,
        jointnet: dict,
        num_classes: int,
        *,
        memory_budget: int | str | None = None,
        max_samples_per_group: int | None = None,
        fuse_loss_wer: bool = True,
        **nemo_arguments,
    ) -> None:
        super().__init__(jointnet=jointnet, num_classes=num_classes, fuse_loss_wer=fuse_loss_wer, **nemo_arguments)
        self.configure_samplewise(
            SamplewiseOptions(memory_budget=memory_budget, max_samples_per_group=max_samples_per_group)
        )

    def configure_samplewise(self, options: SamplewiseOptions) -> None:
        """Set the sample-wise loss's budget and group size (`options`, checked when built, before any training
        step; its lattice, blank, reduction and omega are NeMo's loss's, set when the loss is built)."""
        self.samplewise_options = options
        self.samplewise_loss: TransducerLoss | None = None  # built for NeMo's loss settings on first use
        self.samplewise_settings: LossSettings | None = None

    def _samplewise_loss(self, settings: LossSettings) -> TransducerLoss:
        """The sample-wise loss for NeMo's current loss settings (rebuilt when the model sets another loss)."""
        if self.samplewise_loss is None or settings != self.samplewise_settings:
            options = replace(
                self.samplewise_options,
                lattice=settings.lattice,
                blank=settings.blank,
                reduction="none",  # NeMo's own reduction follows
                omega=settings.omega,
            )
            self.samplewise_loss = TransducerLoss("samplewise", **options.arguments())
            self.samplewise_settings = settings
        return self.samplewise_loss

    def samplewise_nemo_loss(
        self,
        encoder_outputs: torch.Tensor,  # (B, H_e, T), as NeMo's encoder returns it
        decoder_outputs: torch.Tensor,  # (B, H_p, U+1)
        encoder_lengths: torch.Tensor,  # (B,)
        transcripts: torch.Tensor,  # (B, >= U)
        transcript_lengths: torch.Tensor,  # (B,)
    ) -> torch.Tensor:
        """NeMo's transducer loss of the batch (reduced as ``self.loss.reduction`` says), computed sample-wise."""
        settings = loss_settings(self.loss, self)
        predictor_out = decoder_outputs.transpose(1, 2)  # (B, U+1, H_p)
        losses = self._samplewise_loss(
            settings
        )(
            encoder_outputs.transpose(1, 2),  # (B, T, H_e)
            predictor_out,
            JointNetwork(self),
            transcripts[:, : predictor_out.shape[1] - 1],  # (B, U): NeMo pads transcripts beyond U at most
            encoder_lengths,
            transcript_lengths,
        )  # (B,)
        return self.loss.reduce(losses, transcript_lengths)

    @typecheck()
    def forward(
        self,
        encoder_outputs: torch.Tensor,
        decoder_outputs: torch.Tensor | None,
        encoder_lengths: torch.Tensor | None = None,
        transcripts: torch.Tensor | None = None,
        transcript_lengths: torch.Tensor | None = None,
        compute_wer: bool = False,
        keep_hypotheses: bool = False,
    ):
        """``RNNTJoint.forward``; in the fused path with decoder outputs, (loss, wer, wer_num, wer_denom) with the
        loss computed sample-wise."""
        arguments = dict(
            encoder_outputs=encoder_outputs,
            encoder_lengths=encoder_lengths,
            transcripts=transcripts,
            transcript_lengths=transcript_lengths,
            compute_wer=compute_wer,
            keep_hypotheses=keep_hypotheses,
        )
        if not self.fuse_loss_wer or decoder_outputs is None:
            return super().forward(decoder_outputs=decoder_outputs, **arguments)
        # NeMo's fused path without decoder outputs: its own checks, and its WER (and hypotheses) only.
        _, wer, wer_num, wer_denom = super().forward(decoder_outputs=None, **arguments)
        loss = self.samplewise_nemo_loss(
            encoder_outputs, decoder_outputs, encoder_lengths, transcripts, transcript_lengths
        )
        return loss, wer, wer_num, wer_denom
