"""The greedy step of each lattice: what the search does with the joint's output at one (frame, predictor state).

A step reads the joint's raw scores of a batch of hypotheses (and what its shallow-fusion scorers say about the
next token, a `FusionStep` made by `greedy_fusion_step`) and returns the best token, how many frames the search
moves on and the step's score; the search takes the scorers' states after the token that ends its label step
from that same `FusionStep` (`chosen_states`), once per label step rather than once per frame read. With fusion
(`asr_plugin.decoding.fusion`) the step keeps NeMo's rule of its label-looping greedy searches with an NGPU-LM or
boosting tree ("preserve blank / non-blank category"): the joint alone decides blank or token (its argmax), and
where it says token, the token is the argmax over the non-blank tokens of the joint's log-probabilities plus the
weighted scorer scores and is scored with that fused value; the blank's score and TDT's durations are the joint's
alone. So an LM's negative scores never turn a token into a blank, nor a boosting bonus a blank into a token.
`asr_plugin.decoding.streaming_greedy` runs the one search loop over these steps (offline `greedy_search` is that
loop over a single chunk), so a lattice adds only its step (and its durations to
`asr_plugin.decoding.interface.lattice_durations`).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import torch

from asr_plugin.decoding.fusion import Fusion, FusionStep, ScorerStates, fusion_step
from asr_plugin.decoding.interface import DecoderJoint


class GreedyChoice(NamedTuple):
    """The greedy decision of a step, each (B,).

    Attributes:
        token: int64 best token id (blank included).
        advance: int64 frames the search moves on after this step (0: the next step reads the same frame).
        score: float64 log-probability of the choice, plus its weighted fusion scores.
        token_logp: (B, V) float the joint's log-probabilities of the V tokens (confidence: without fusion).
        duration_logp: (B, D) float TDT's duration log-probabilities at the step (duration confidence); None
            for RNN-T.
    """

    token: torch.Tensor
    advance: torch.Tensor
    score: torch.Tensor
    token_logp: torch.Tensor
    duration_logp: torch.Tensor | None = None


NO_FUSION = FusionStep(None, ())


class GreedyStep(Protocol):
    """(B, V + D) raw joint scores and the fusion scorers' step -> the greedy choice of each row."""

    def __call__(self, logits: torch.Tensor, fusion: FusionStep = NO_FUSION) -> GreedyChoice: ...


def greedy_fusion_step(fusion: Fusion, states: ScorerStates, blank: int) -> FusionStep:
    """`fusion_step` of the scorers from their (B,) states with the blank's bonus -inf: the step every frame a
    greedy label step reads uses (the states do not change on a blank), so that the fused choice among the
    non-blank tokens is one add and one max a frame."""
    step = fusion_step(fusion, states)
    if step.bonus is not None:
        step.bonus[..., blank] = -math.inf
    return step


def fused_greedy_token(token_logp: torch.Tensor, fusion: FusionStep, blank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, V) the joint's token log-probabilities, the scorers' `greedy_fusion_step` -> (B,) score, (B,) token by
    NeMo's rule: the blank where the joint's argmax is the blank (its log-probability), else the best non-blank
    token by the fused scores (its fused score). Without fusion: the joint's argmax."""
    score, token = token_logp.max(dim=-1)
    if fusion.bonus is None:
        return score, token
    fused_score, fused_token = (token_logp + fusion.bonus.to(token_logp.dtype)).max(dim=-1)
    is_blank = token == blank
    return torch.where(is_blank, score, fused_score), torch.where(is_blank, token, fused_token)


class RnntGreedyStep:
    """RNN-T: the argmax of the V token scores (with fusion `fused_greedy_token`); a blank moves to the next
    frame, a token stays at its frame. The score is the chosen symbol's (for a token with fusion: fused)
    log-probability."""

    def __init__(self, decoder: DecoderJoint) -> None:
        self.blank = decoder.blank_id

    def __call__(self, logits: torch.Tensor, fusion: FusionStep = NO_FUSION) -> GreedyChoice:
        token_logp = logits.float().log_softmax(dim=-1)  # (B, V)
        score, token = fused_greedy_token(token_logp, fusion, self.blank)  # (B,), (B,)
        advance = (token == self.blank).long()
        return GreedyChoice(token, advance, score.double(), token_logp)


class TdtGreedyStep:
    """TDT, as NeMo's TDT ``greedy_batch``: the best token (argmax of the V token scores; with fusion
    `fused_greedy_token`, as NeMo's tdt_label_looping, the durations untouched) and the best
    duration d (argmax of the D duration scores); the search moves on d frames, except that a blank whose best
    duration is 0 moves on 1 and is scored with duration 1's log-probability. Score: (a fused token: fused) log
    softmax(tokens)[token] + log softmax(durations)[duration taken]."""

    def __init__(self, decoder: DecoderJoint) -> None:
        self.blank = decoder.blank_id
        self.vocab = decoder.vocab_size
        self.durations = decoder.durations  # contain 0 and 1 (the lattice checks it)

    def __call__(self, logits: torch.Tensor, fusion: FusionStep = NO_FUSION) -> GreedyChoice:
        durations = torch.tensor(self.durations, dtype=torch.long, device=logits.device)  # (D,)
        logits = logits.float()
        all_token_logp = logits[:, : self.vocab].log_softmax(-1)  # (B, V)
        token_logp, token = fused_greedy_token(all_token_logp, fusion, self.blank)  # (B,), (B,)
        duration_logp = logits[:, self.vocab :].log_softmax(-1)  # (B, D)
        index = duration_logp.argmax(-1)
        stays = (token == self.blank) & (durations[index] == 0)
        index = torch.where(stays, self.durations.index(1), index)
        score = token_logp + duration_logp.gather(1, index[:, None]).squeeze(1)
        return GreedyChoice(token, durations[index], score.double(), all_token_logp, duration_logp)


def greedy_step(decoder: DecoderJoint) -> GreedyStep:
    """The greedy step of `decoder`'s lattice: TDT's where it has durations, RNN-T's otherwise."""
    return RnntGreedyStep(decoder) if decoder.durations is None else TdtGreedyStep(decoder)
