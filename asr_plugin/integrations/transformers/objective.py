"""What transformers' Parakeet transducer loss asks of the sample-wise loss, read from the model and its config.

``ParakeetForRNNT`` and ``ParakeetForTDT`` compute their loss with ``transformers.loss`` (``LOSS_MAPPING``,
found through the model's ``loss_function``) over the whole joint output:

- RNN-T (``loss_rnnt.rnnt_loss``, torchaudio's loss): blank ``config.blank_token_id``; a sample's label length
  is its number of labels different from the blank (the labels are padded with the blank);
- TDT (``loss_tdt.tdt_loss``, NeMo's pure-PyTorch TDT loss): blank ``config.blank_token_id``, the durations
  ``config.durations`` (one duration score each, after the ``config.vocab_size`` token scores), ``sigma`` (a
  call's keyword argument, default 0); a sample's label length is its number of labels different from
  ``config.pad_token_id``;
- both: the frames of a sample are its encoder output's attention mask's sum, the reduction a call's keyword
  argument ``reduction`` (RNN-T's default "mean_volume", TDT's "mean", read from transformers' loss functions)
  with NeMo's meanings (``reduce_losses``). No gradient clamp, FastEmit or omega.

A model whose ``loss_function`` was replaced computes another loss and is refused.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers.loss.loss_utils import LOSS_MAPPING
from transformers.models.parakeet.modeling_parakeet import ParakeetForRNNT, ParakeetForTDT

from asr_plugin.losses import RNNT, TDT, TransducerLattice

# transformers' reductions of the Parakeet losses (NeMo's names), in the order its error message lists them.
REDUCTIONS = ("mean_volume", "mean_batch", "mean", "sum", "none")


def _default(loss_function, name: str):
    return inspect.signature(loss_function).parameters[name].default


@dataclass(frozen=True)
class ParakeetObjective:
    """The loss a Parakeet transducer's forward computes with ``labels``."""

    blank: int
    label_padding: int  # the id transformers does not count as a label: blank (RNN-T) or pad_token_id (TDT)
    durations: tuple[int, ...] | None  # TDT only
    default_reduction: str
    default_sigma: float  # TDT only

    @property
    def num_extra_outputs(self) -> int:
        return len(self.durations or ())

    def lattice(self, sigma: float) -> TransducerLattice:
        return RNNT() if self.durations is None else TDT(self.durations, sigma)

    def label_lengths(self, labels: torch.Tensor) -> torch.Tensor:
        return (labels != self.label_padding).sum(-1)


def parakeet_objective(model: ParakeetForRNNT) -> ParakeetObjective:
    """The loss `model` computes with labels; ValueError naming what the sample-wise loss cannot compute, TypeError
    for a model that is not a Parakeet transducer."""
    if not isinstance(model, ParakeetForRNNT):
        raise TypeError(
            f"model must be transformers' ParakeetForRNNT or ParakeetForTDT, got {type(model).__module__}."
            f"{type(model).__name__}"
        )
    kind = "ParakeetForTDT" if isinstance(model, ParakeetForTDT) else "ParakeetForRNNT"
    loss_function = LOSS_MAPPING[kind]
    if model.loss_function is not loss_function:
        raise ValueError(
            f"model.loss_function is {getattr(model.loss_function, '__name__', model.loss_function)!r}, not "
            f"transformers' {loss_function.__name__}: use_samplewise computes transformers' own {kind} loss"
        )
    config = model.config
    if not 0 <= config.blank_token_id < config.vocab_size:
        raise ValueError(
            f"config.blank_token_id = {config.blank_token_id} is not in [0, vocab_size = {config.vocab_size})"
        )
    if kind == "ParakeetForRNNT":
        return ParakeetObjective(
            config.blank_token_id, config.blank_token_id, None, _default(loss_function, "reduction"), 0.0
        )
    objective = ParakeetObjective(
        config.blank_token_id,
        config.pad_token_id,
        tuple(int(d) for d in config.durations),
        _default(loss_function, "reduction"),
        float(_default(loss_function, "sigma")),
    )
    try:
        objective.lattice(objective.default_sigma)
    except ValueError as error:
        raise ValueError(f"config.durations = {list(config.durations)}: {error}") from error
    return objective


def reduce_losses(losses: torch.Tensor, label_lengths: torch.Tensor, reduction: str) -> torch.Tensor:
    """The (B,) per-sample losses reduced as transformers' Parakeet losses do (NeMo's reductions)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction = {reduction!r}: transformers' Parakeet losses take one of {REDUCTIONS}")
    lengths = label_lengths.to(losses.dtype)
    if reduction == "mean_volume":
        return losses.sum() / lengths.sum()
    if reduction == "mean_batch":
        return losses.mean()
    if reduction == "mean":
        return (losses / lengths).mean()
    if reduction == "sum":
        return losses.sum()
    return losses
