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
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

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
