"""The greedy step of each lattice: what the search does with the joint's output at one (frame, predictor state).

A step reads the joint's raw scores of a batch of hypotheses and returns the best token, how many frames the
search moves on, and the step's log-probability. `asr_plugin.decoding.streaming_greedy` runs the one search loop
over these steps (offline `greedy_search` is that loop over a single chunk), so a lattice adds only its step
(and its durations to `asr_plugin.decoding.interface.lattice_durations`).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

from asr_plugin.decoding.interface import DecoderJoint


class GreedyChoice(NamedTuple):
    """The greedy decision of a step, each (B,).

    Attributes:
        token: int64 best token id (blank included).
        advance: int64 frames the search moves on after this step (0: the next step reads the same frame).
        score: float64 log-probability of the choice.
        token_logp: (B, V) float the log-probabilities of the V tokens the choice was made from (confidence).
        duration_logp: (B, D) float TDT's duration log-probabilities at the step (duration confidence); None
            for RNN-T.
    """

    token: torch.Tensor
    advance: torch.Tensor
    score: torch.Tensor
    token_logp: torch.Tensor
    duration_logp: torch.Tensor | None = None


class GreedyStep(Protocol):
    """(B, V + D) raw joint scores -> the greedy choice of each row."""

    def __call__(self, logits: torch.Tensor) -> GreedyChoice: ...


class RnntGreedyStep:
    """RNN-T: the argmax of the V token scores; a blank moves to the next frame, a token stays at its frame.
    The score is the chosen symbol's log-probability."""

    def __init__(self, decoder: DecoderJoint) -> None:
        self.blank = decoder.blank_id

    def __call__(self, logits: torch.Tensor) -> GreedyChoice:
        token_logp = logits.float().log_softmax(dim=-1)  # (B, V)
        score, token = token_logp.max(dim=-1)  # (B,), (B,)
        return GreedyChoice(token, (token == self.blank).long(), score.double(), token_logp)


class TdtGreedyStep:
    """TDT, as NeMo's TDT ``greedy_batch``: the best token (argmax of the V token scores) and the best duration d
    (argmax of the D duration scores); the search moves on d frames, except that a blank whose best duration is 0
    moves on 1 and is scored with duration 1's log-probability. Score: log softmax(tokens)[token] +
    log softmax(durations)[duration taken]."""

    def __init__(self, decoder: DecoderJoint) -> None:
        self.blank = decoder.blank_id
        self.vocab = decoder.vocab_size
        self.durations = decoder.durations  # contain 0 and 1 (the lattice checks it)

    def __call__(self, logits: torch.Tensor) -> GreedyChoice:
        durations = torch.tensor(self.durations, dtype=torch.long, device=logits.device)  # (D,)
        logits = logits.float()
        all_token_logp = logits[:, : self.vocab].log_softmax(-1)  # (B, V)
        token_logp, token = all_token_logp.max(-1)  # (B,), (B,)
        duration_logp = logits[:, self.vocab :].log_softmax(-1)  # (B, D)
        index = duration_logp.argmax(-1)
        stays = (token == self.blank) & (durations[index] == 0)
        index = torch.where(stays, self.durations.index(1), index)
        score = token_logp + duration_logp.gather(1, index[:, None]).squeeze(1)
        return GreedyChoice(token, durations[index], score.double(), all_token_logp, duration_logp)


def greedy_step(decoder: DecoderJoint) -> GreedyStep:
    """The greedy step of `decoder`'s lattice: TDT's where it has durations, RNN-T's otherwise."""
    return RnntGreedyStep(decoder) if decoder.durations is None else TdtGreedyStep(decoder)
