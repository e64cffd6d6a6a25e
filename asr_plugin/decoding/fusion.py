"""Shallow fusion: models of the token sequence that a search adds to the joint's token scores, as NeMo's NGPU-LM
and GPU boosting tree are added to its greedy and beam searches.

An n-gram language model (`asr_plugin.decoding.ngram_lm`) and a phrase-boosting graph
(`asr_plugin.decoding.phrase_boosting`) are both a `TokenScorer`: a finite automaton over the transducer's token
ids whose states are int64 indices, one per hypothesis, so that a batched search keeps them in a tensor beside its
predictor state, gathers them with its hypotheses and merges two hypotheses only when their scorer states match.

Conventions every scorer keeps (the searches rely on them):
- Token ids are the transducer's, 0..V-1 with the blank among them. The blank's column scores 0 and keeps the
  state: a search never advances a scorer on a blank, and a blank's score is the joint's alone.
- Scores are natural-log, unweighted; the search multiplies each scorer's by its weight.
- ``final`` is added once when a hypothesis ends (an LM's end-of-sentence; a boosting graph takes back the bonus
  of a match that did not complete).
- A scorer whose scores are a language model's log-probabilities of the next token says so with a true
  ``language_model`` attribute (`NgramLM`; a boosting graph's bonuses are not probabilities and have none). The
  beam search's blank scoring (`lm_weighted_blank`) is weighted by those scorers' weights alone.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol, Sequence, runtime_checkable

import torch


@runtime_checkable
class TokenScorer(Protocol):
    """A finite automaton over token ids that scores every next token of a batch of states.

    Attributes:
        vocab_size: V, the transducer's token count (blank included) the scores are given for.
        blank_id: the transducer's blank.
    """

    vocab_size: int
    blank_id: int

    def initial_states(self, num: int, device: torch.device) -> torch.Tensor:
        """(num,) int64 the state before the first token."""
        ...

    def advance(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) int64 states -> (N, V) float32 the score of each next token, (N, V) int64 the state it leads to
        (the blank's column: score 0, the same state)."""
        ...

    def final(self, states: torch.Tensor) -> torch.Tensor:
        """(N,) int64 states -> (N,) float32 the score of ending there."""
        ...


class WeightedScorer(NamedTuple):
    """A scorer and the weight a search multiplies its scores by."""

    scorer: TokenScorer
    weight: float


Fusion = Sequence[WeightedScorer]
ScorerStates = tuple[torch.Tensor, ...]  # one int64 tensor of states per scorer, in the fusion's order


BLANK_LM_SCORE_MODES = ("lm_weighted_full", "no_score")
NEMO_BLANK_CLAMP = 1.0 - 1e-2  # NeMo's cap on P(blank) in log(1 - P(blank)) (its guard for bf16), kept to match it


def is_language_model(scorer: TokenScorer) -> bool:
    """Whether the scorer's scores are a language model's (a true ``language_model`` attribute)."""
    return bool(getattr(scorer, "language_model", False))


def language_model_weight(fusion: Fusion) -> float:
    """The summed weight of the fusion's language models (scorers with a true ``language_model``)."""
    return float(sum(item.weight for item in fusion if is_language_model(item.scorer)))


def lm_weighted_blank(token_logp: torch.Tensor, weight: float, blank_id: int) -> torch.Tensor:
    """NeMo's ``blank_lm_score_mode=lm_weighted_full`` for an LM of summed `weight` a (`language_model_weight`):
    (..., V) log-probabilities -> the blank's times (1 + a), every other token's plus a x log(1 - P(blank)),
    P(blank) capped at 0.99 (`NEMO_BLANK_CLAMP`). Why: the LM's next-token distribution is spread over the
    joint's non-blank mass, so the fused token scores log P(k) + a x log((1 - P(blank)) P_LM(k)) and the blank's
    (1 + a) log P(blank) are on one scale, and the LM's negative scores no longer lose every token to the blank.
    The fusion's scores are added on top (`fused_scores`); weight 0 returns `token_logp` itself."""
    if weight == 0:
        return token_logp
    blank = token_logp[..., blank_id]
    non_blank = torch.log1p(-blank.exp().clamp(max=NEMO_BLANK_CLAMP))  # (...)
    weighted = token_logp + weight * non_blank[..., None]
    weighted[..., blank_id] = (1.0 + weight) * blank
    return weighted


def check_blank_lm_score_mode(mode: str) -> str:
    """`mode` after a ValueError naming it unless it is one of `BLANK_LM_SCORE_MODES`."""
    if mode not in BLANK_LM_SCORE_MODES:
        raise ValueError(f"blank_lm_score_mode={mode!r}: expected one of {BLANK_LM_SCORE_MODES}")
    return mode


def check_fusion(fusion: Fusion, vocab_size: int, blank_id: int) -> tuple[WeightedScorer, ...]:
    """The fusion as a tuple, after TypeError/ValueError naming the scorer unless each is a `WeightedScorer` of a
    `TokenScorer` over the model's V tokens and blank, with a finite weight."""
    checked = tuple(fusion)
    for i, item in enumerate(checked):
        if not isinstance(item, WeightedScorer) or not isinstance(item.scorer, TokenScorer):
            raise TypeError(f"fusion[{i}] must be a WeightedScorer(TokenScorer, weight), got {type(item).__name__}")
        if not isinstance(item.weight, (int, float)) or not math.isfinite(item.weight):
            raise ValueError(f"fusion[{i}] ({type(item.scorer).__name__}) has weight {item.weight!r}: not finite")
        if item.scorer.vocab_size != vocab_size or item.scorer.blank_id != blank_id:
            raise ValueError(
                f"fusion[{i}] ({type(item.scorer).__name__}) scores V={item.scorer.vocab_size} tokens with blank "
                f"{item.scorer.blank_id}; the model has V={vocab_size}, blank {blank_id}"
            )
    return checked


def initial_scorer_states(fusion: Fusion, shape: tuple[int, ...], device: torch.device) -> ScorerStates:
    """Each scorer's start state for hypotheses of `shape` (e.g. (B,) or (B, K))."""
    num = math.prod(shape)
    return tuple(item.scorer.initial_states(num, device).reshape(shape) for item in fusion)


class FusionStep(NamedTuple):
    """What the scorers say about the next token of hypotheses in given states.

    Attributes:
        bonus: (..., V) float32 the weighted sum of the scorers' scores of each next token (None: no fusion).
        next_states: each scorer's (..., V) state after each token.
    """

    bonus: torch.Tensor | None
    next_states: ScorerStates


def fusion_step(fusion: Fusion, states: ScorerStates) -> FusionStep:
    """Every scorer advanced once from its (...) states (a greedy search reuses it for every frame it reads until
    the next token: the states do not change on a blank)."""
    bonus = None
    next_states = []
    for item, state in zip(fusion, states):
        scores, after = item.scorer.advance(state.reshape(-1))  # (N, V) each
        weighted = item.weight * scores.reshape(*state.shape, -1)
        bonus = weighted if bonus is None else bonus + weighted
        next_states.append(after.reshape(*state.shape, -1))
    return FusionStep(bonus, tuple(next_states))


def fused_scores(token_logp: torch.Tensor, step: FusionStep, blank_id: int) -> torch.Tensor:
    """Beam search's combiner (greedy search's steps mask the blank instead: `greedy_steps.greedy_fusion_step`):
    (..., V) the joint's token log-probabilities plus the step's bonus over the non-blank tokens; the blank's
    column is the joint's alone. Without fusion the log-probabilities come back as they are (the searches' results
    are then exactly those without fusion)."""
    if step.bonus is None:
        return token_logp
    fused = token_logp + step.bonus.to(token_logp.dtype)
    fused[..., blank_id] = token_logp[..., blank_id]
    return fused


def fused_token_scores(
    token_logp: torch.Tensor, fusion: Fusion, states: ScorerStates, blank_id: int
) -> tuple[torch.Tensor, ScorerStates]:
    """`fused_scores` of the scorers advanced from their (...) states (`fusion_step`), and each scorer's (..., V)
    state after each token."""
    step = fusion_step(fusion, states)
    return fused_scores(token_logp, step, blank_id), step.next_states


def chosen_states(next_states: ScorerStates, token: torch.Tensor) -> ScorerStates:
    """Each scorer's state after the chosen (...) tokens, from its (..., V) states after every token."""
    return tuple(after.gather(-1, token[..., None]).squeeze(-1) for after in next_states)


def where_states(condition: torch.Tensor, chosen: ScorerStates, other: ScorerStates) -> ScorerStates:
    """Each scorer's states from `chosen` where `condition` holds, from `other` elsewhere."""
    return tuple(torch.where(condition, a, b) for a, b in zip(chosen, other))


def final_scores(fusion: Fusion, states: ScorerStates, lm_final: bool = True) -> torch.Tensor | None:
    """(...) float64 the weighted sum of every scorer's score of ending in its (...) states; None without fusion.
    `lm_final` False leaves the language models' (their end-of-sentence scores) out."""
    if not fusion:
        return None
    total = torch.zeros((), dtype=torch.float64)
    for item, state in zip(fusion, states):
        if not lm_final and is_language_model(item.scorer):
            continue
        score = item.weight * item.scorer.final(state.reshape(-1)).double().reshape(state.shape)
        total = total + score
    return total
