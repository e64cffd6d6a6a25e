"""NeMo's loss reductions, computed from per-utterance losses: how a batch's losses become the loss to minimise.

NeMo's ``RNNTLoss`` and ``CTCLoss`` reduce per-utterance losses l_b of utterances with U_b tokens as their
``reduction`` (``rnnt_reduction``, ``aux_ctc.ctc_reduction``) says:

- ``mean_batch``: sum_b l_b / B, nats per utterance (NeMo's default, and this recipe's);
- ``mean_volume``: sum_b l_b / sum_b U_b, nats per token (NeMo's FastConformer configs): long utterances weigh
  more, and the scale no longer grows with utterance length;
- ``mean``: sum_b (l_b / U_b) / B, each utterance's nats per token, averaged over utterances;
- ``sum``: sum_b l_b.

Each is a weighted sum over utterances divided by a denominator (B, the batch's tokens, or 1). Under DDP the
recipe divides by the denominator of every rank's utterances together (one all-reduce of the denominators per
step) and multiplies by the R ranks, because DDP averages gradients over ranks: the update is then the
reduction over the global batch, whatever each rank's share. NeMo divides by each rank's own denominator
instead; with equal shares the two agree.
"""

from __future__ import annotations

import torch

REDUCTIONS = ("mean_batch", "mean_volume", "mean", "sum")
# What a loss node's legacy ``reduction`` (``TransducerLoss(reduction=...)``, checkpoints of earlier versions)
# meant as a training reduction.
LEGACY_REDUCTIONS = {"mean": "mean_batch", "sum": "sum"}


def check_reduction(reduction: str, key: str) -> str:
    """`reduction` if it is one of `REDUCTIONS`, else ValueError naming the config `key`."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{key}={reduction!r}: choose one of {REDUCTIONS} (NeMo's reductions)")
    return reduction


def reduction_parts(
    losses: torch.Tensor, target_lengths: torch.Tensor, reduction: str
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B,) per-utterance losses and (B,) token counts -> (the weighted sum, its denominator or None for "sum").

    The reduced loss is ``numerator / denominator``; the denominator is returned apart so that DDP can
    all-reduce it (module docstring). An empty transcript counts as one token, so nothing is divided by 0."""
    tokens = target_lengths.to(losses.dtype)
    if reduction == "mean_batch":
        return losses.sum(), torch.full((), float(losses.shape[0]), device=losses.device, dtype=losses.dtype)
    if reduction == "mean_volume":
        return losses.sum(), tokens.sum().clamp(min=1.0)
    if reduction == "mean":
        return (losses / tokens.clamp(min=1.0)).sum(), torch.full(
            (), float(losses.shape[0]), device=losses.device, dtype=losses.dtype
        )
    if reduction == "sum":
        return losses.sum(), None
    raise ValueError(f"reduction={reduction!r}: choose one of {REDUCTIONS}")


def reduce_losses(losses: torch.Tensor, target_lengths: torch.Tensor, reduction: str) -> torch.Tensor:
    """The scalar `reduction` of (B,) per-utterance losses on one process (NeMo's ``reduce``)."""
    numerator, denominator = reduction_parts(losses, target_lengths, reduction)
    return numerator if denominator is None else numerator / denominator
