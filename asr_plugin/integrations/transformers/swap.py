"""``use_samplewise`` / ``undo_samplewise``: a Parakeet transducer's training loss computed sample-wise, and back.

The model keeps its class, weights, config and ``generate``: ``use_samplewise`` sets the instance's ``forward``
(as accelerate does for mixed precision), which computes transformers' forward up to the joint (encoder,
``encoder_projector``, decoder) and then the loss with this project's sample-wise loss on the model's own joint
network, group by group within the memory budget; calls without ``labels`` go to transformers' forward unchanged.
``save_pretrained`` writes the same files as before (nothing is registered on the model).
"""

from __future__ import annotations

import types

import torch
from transformers.models.parakeet.modeling_parakeet import ParakeetForRNNT, ParakeetRNNTOutput
from transformers.utils import can_return_tuple

from asr_plugin.losses import SamplewiseOptions, TransducerLoss

from .joint import ParakeetJoint
from .objective import ParakeetObjective, parakeet_objective, reduce_losses


class SamplewiseParakeetLoss:
    """transformers' Parakeet loss of a model (`objective`), computed sample-wise with `options`' budget.

    Read back as ``model.samplewise_loss`` after ``use_samplewise``; ``last_plan`` is the last call's plan
    (its groups and T-chunks, ``asr_plugin.losses.Plan``).
    """

    def __init__(self, objective: ParakeetObjective, options: SamplewiseOptions) -> None:
        self.objective = objective
        self.options = options
        self.losses: dict[float, TransducerLoss] = {}  # by TDT's sigma, a call's keyword argument
        self.last_plan = None

    def _loss(self, sigma: float) -> TransducerLoss:
        if sigma not in self.losses:
            self.losses[sigma] = TransducerLoss(
                "samplewise",
                lattice=self.objective.lattice(sigma),
                blank=self.objective.blank,
                reduction="none",  # transformers' reduction follows (reduce_losses)
                memory_budget=self.options.memory_budget,
                max_samples_per_group=self.options.max_samples_per_group,
                flash_joint=self.options.flash_joint,
            )
        return self.losses[sigma]

    def __call__(
        self,
        model: ParakeetForRNNT,
        encoder_out: torch.Tensor,  # (B, T, H): the encoder's pooler_output (after encoder_projector)
        frame_mask: torch.Tensor | None,  # (B, T) the encoder output's attention mask; None: every frame
        predictor_out: torch.Tensor,  # (B, U+1, H): the decoder's output
        labels: torch.Tensor,  # (B, >= U)
        reduction: str,
        sigma: float,
    ) -> torch.Tensor:
        batch, frames = encoder_out.shape[:2]
        if frame_mask is None:
            logit_lengths = torch.full((batch,), frames, dtype=torch.long, device=encoder_out.device)
        else:
            logit_lengths = frame_mask.sum(-1)
        label_lengths = self.objective.label_lengths(labels)
        positions = predictor_out.shape[1] - 1
        longest = int(label_lengths.max())
        if longest > positions:
            raise ValueError(
                f"labels hold up to {longest} labels but decoder_input_ids only {positions + 1} positions: "
                "decoder_input_ids must be [blank] + labels (as ParakeetProcessor makes them)"
            )
        loss = self._loss(sigma)
        losses = loss(
            encoder_out,
            predictor_out,
            ParakeetJoint(model.joint, self.objective.num_extra_outputs),
            labels[:, :positions],
            logit_lengths,
            label_lengths,
        )
        self.last_plan = loss.last_plan
        return reduce_losses(losses, label_lengths.to(losses.device), reduction)


def _check_labels(labels: torch.Tensor, vocab_size: int, objective: ParakeetObjective) -> None:
    bad = (labels < 0) | (labels >= vocab_size)
    if bool(bad.any()):
        b, u = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"labels[{b}, {u}] = {int(labels[b, u])} is not a token id in [0, {vocab_size}): transformers' Parakeet "
            f"losses take labels padded with id {objective.label_padding} (not -100)"
        )


def _decoder_inputs(labels: torch.Tensor, blank: int) -> torch.Tensor:
    """[blank] + labels, the decoder input ``ParakeetProcessor`` makes for a transcript."""
    start = torch.full((labels.shape[0], 1), blank, dtype=labels.dtype, device=labels.device)
    return torch.cat([start, labels], dim=1)


@can_return_tuple
def _samplewise_training_forward(
    model, input_features, attention_mask, decoder_input_ids, encoder_outputs, labels, kwargs
):
    loss_fn: SamplewiseParakeetLoss = model.samplewise_loss
    objective = loss_fn.objective
    _check_labels(labels, model.config.vocab_size, objective)
    if encoder_outputs is None:
        encoder_outputs = model.get_audio_features(
            input_features=input_features, attention_mask=attention_mask, **kwargs
        )
    if decoder_input_ids is None:
        decoder_input_ids = _decoder_inputs(labels, objective.blank)
    predictor_out = model.decoder(decoder_input_ids)
    loss = loss_fn(
        model,
        encoder_outputs.pooler_output,
        encoder_outputs.attention_mask,
        predictor_out,
        labels,
        kwargs.get("reduction", objective.default_reduction),
        float(kwargs.get("sigma", objective.default_sigma)),
    )
    return ParakeetRNNTOutput(
        loss=loss,
        logits=None,  # the (B, T, U+1, V) joint output this forward exists to avoid
        last_hidden_state=encoder_outputs.last_hidden_state,
        pooler_output=encoder_outputs.pooler_output,
        hidden_states=encoder_outputs.hidden_states,
        attentions=encoder_outputs.attentions,
        decoder_cache=None,
    )


def samplewise_forward(
    self,
    input_features: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    decoder_input_ids: torch.LongTensor | None = None,
    decoder_cache=None,
    use_decoder_cache: bool | None = None,
    encoder_outputs=None,
    labels: torch.Tensor | None = None,
    **kwargs,
):
    """transformers' Parakeet forward (the same arguments); with ``labels`` (and no decoder cache: training),
    the loss computed sample-wise and no ``logits``. Without ``decoder_input_ids``, [blank] + labels."""
    if labels is None or decoder_cache is not None or use_decoder_cache:
        return type(self).forward(
            self,
            input_features=input_features,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_cache=decoder_cache,
            use_decoder_cache=use_decoder_cache,
            encoder_outputs=encoder_outputs,
            labels=labels,
            **kwargs,
        )
    return _samplewise_training_forward(
        self, input_features, attention_mask, decoder_input_ids, encoder_outputs, labels, kwargs
    )


def _installed(model: ParakeetForRNNT) -> bool:
    """Whether `model.forward` is this module's; ValueError when something else replaced transformers' forward."""
    forward = model.__dict__.get("forward")
    if forward is None:
        return False
    if getattr(forward, "__func__", None) is samplewise_forward:
        return True
    raise ValueError(
        f"model.forward is {forward!r}, not transformers' forward: something wrapped it (accelerate's mixed "
        "precision does, e.g. inside a Trainer); call use_samplewise / undo_samplewise on the unwrapped model "
        "(accelerate's unwrap_model(model, keep_fp32_wrapper=False))"
    )


def use_samplewise(
    model: ParakeetForRNNT,
    memory_budget: int | str | None = None,
    max_samples_per_group: int | None = None,
    flash_joint: str = "auto",
) -> ParakeetForRNNT:
    """Make `model`'s training loss sample-wise, in place, and return `model`.

    After it, ``model(input_features=..., attention_mask=..., decoder_input_ids=..., labels=...)`` returns
    transformers' own loss (the same value and gradients: blank, durations, label lengths, reduction and sigma as
    ``asr_plugin.integrations.transformers.objective`` reads them) with ``logits=None``, never forming the
    (B, T, U+1, V) joint output; ``generate`` and calls without labels are transformers' own. Calling it again
    changes the budget. ``undo_samplewise(model)`` restores transformers' forward.

    Args:
        model: a ``ParakeetForRNNT`` or ``ParakeetForTDT`` (built from a config or ``from_pretrained``).
        memory_budget: bytes or a string like "512MiB" bounding the loss's transient memory per step (None:
            1 GiB on CUDA, 256 MiB on CPU), as in ``asr_plugin.losses.TransducerLoss``.
        max_samples_per_group: at most this many samples per loss step (None: as many as fit the budget).
        flash_joint: "auto", "always" or "never" (``asr_plugin.losses.SamplewiseOptions``).

    Raises TypeError for a model that is not a Parakeet transducer, ValueError for a loss the sample-wise loss
    does not compute (a replaced ``loss_function``, TDT durations it does not take) or a bad option.
    """
    objective = parakeet_objective(model)  # refuse before changing anything
    options = SamplewiseOptions(
        lattice=objective.lattice(objective.default_sigma),
        blank=objective.blank,
        memory_budget=memory_budget,
        max_samples_per_group=max_samples_per_group,
        flash_joint=flash_joint,
    )
    _installed(model)
    model.samplewise_loss = SamplewiseParakeetLoss(objective, options)
    model.forward = types.MethodType(samplewise_forward, model)
    return model


def undo_samplewise(model: ParakeetForRNNT) -> ParakeetForRNNT:
    """Restore transformers' forward (and loss) on `model`, in place, and return `model`; ValueError if
    `use_samplewise` was not applied to it."""
    if not _installed(model):
        raise ValueError("use_samplewise was not applied to this model: its forward is transformers' own")
    del model.forward
    del model.samplewise_loss
    return model
