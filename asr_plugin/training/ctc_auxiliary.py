"""Auxiliary CTC loss on the encoder frames, added to the transducer loss during training.

A transducer learns slowly at first: until the encoder's frames line up with the tokens, the predictor's
language model explains most of the loss and the joint barely listens to the encoder. CTC on the encoder
output through a linear layer of its own gives the encoder a direct, alignment-free signal from the first
step (NeMo's hybrid RNNT-CTC models weight it 0.3; icefall's ``*_ctc`` recipes do the same). The head is used
only for the loss: decoding, export and fine-tuning see the transducer alone.
"""

from __future__ import annotations

import torch
from torch import nn


class AuxiliaryCTC(nn.Module):
    """``Linear(H_e -> V)`` over encoder frames and the CTC loss of each utterance's targets (the training module
    reduces them, ``ctc_reduction``, as NeMo's hybrid models reduce theirs).

    Args:
        encoder_dim: H_e, the encoder's output size.
        vocab_size: V, including blank (the transducer's vocabulary: CTC shares its blank id).
        blank: the blank id (0 in this project).
    """

    def __init__(self, encoder_dim: int, vocab_size: int, blank: int = 0) -> None:
        super().__init__()
        self.output = nn.Linear(encoder_dim, vocab_size)
        self.blank = blank

    def forward(
        self,
        encoder_out: torch.Tensor,
        encoder_lengths: torch.Tensor,
        targets: torch.Tensor,
        target_lengths: torch.Tensor,
    ) -> torch.Tensor:
        """(B, T, H_e) frames, (B,) int64 frame counts, (B, U) int64 padded targets, (B,) int64 -> (B,) losses.

        An utterance with more tokens than CTC can emit in its frames contributes 0 (``zero_infinity``)
        instead of an infinite loss; with 4x subsampling that needs over 25 tokens per second.
        """
        log_probs = self.output(encoder_out).float().log_softmax(dim=-1).transpose(0, 1)  # (T, B, V)
        return nn.functional.ctc_loss(
            log_probs, targets, encoder_lengths, target_lengths, blank=self.blank, reduction="none", zero_infinity=True
        )
