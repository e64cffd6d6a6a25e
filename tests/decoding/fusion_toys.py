"""A hand-written token scorer the fusion tests share, as the bonus of `greedy_references`' plain searches
(tests/decoding is on sys.path for its test files, so they import this module by name)."""

from __future__ import annotations

import torch


class TableScorer:
    """A finite automaton given by tables: (S, V) scores, (S, V) next states, (S,) final scores (a `TokenScorer`).
    The blank's column must score 0 and keep the state. `language_model`: the scorer says its scores are an LM's
    (the beam search's blank scoring counts its weight)."""

    def __init__(
        self,
        scores: torch.Tensor,
        next_states: torch.Tensor,
        final: torch.Tensor,
        blank_id: int = 0,
        language_model: bool = False,
    ):
        self.scores, self.next_states, self.final_table = scores.float(), next_states.long(), final.float()
        self.vocab_size, self.blank_id, self.language_model = scores.shape[1], blank_id, language_model

    def initial_states(self, num: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(num, dtype=torch.long, device=device)

    def advance(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.scores[states], self.next_states[states]

    def final(self, states: torch.Tensor) -> torch.Tensor:
        return self.final_table[states]


def favouring_scorer(vocab: int, token: int, bonus: float = 1.5) -> TableScorer:
    """Two states: from state 0 `token` earns `bonus` and leads to state 1; from state 1 a repeat of it costs 0.5,
    any other token earns 0.2 and leads back to 0; ending in state 1 costs 0.3."""
    scores = torch.zeros(2, vocab)
    scores[0, token], scores[1] = bonus, 0.2
    scores[1, token] = -0.5
    scores[:, 0] = 0.0
    next_states = torch.zeros(2, vocab, dtype=torch.long)
    next_states[:, token] = 1
    next_states[:, 0] = torch.tensor([0, 1])
    return TableScorer(scores, next_states, torch.tensor([0.0, -0.3]))


def penalty_scorer(vocab: int, cost: float) -> TableScorer:
    """One state: every non-blank token costs `cost` (an LM's negative scores at their simplest)."""
    scores = torch.full((1, vocab), -cost)
    scores[:, 0] = 0.0
    return TableScorer(scores, torch.zeros(1, vocab, dtype=torch.long), torch.zeros(1))


def bigram_scorer(vocab: int, seed: int) -> TableScorer:
    """A random token bigram LM (a `language_model`): one state per last token (state 0: the start), each row a
    log-softmax over the non-blank tokens, random final scores."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(vocab, vocab, generator=generator) * 2.0
    scores[:, 0] = -torch.inf
    scores = scores.log_softmax(-1)
    scores[:, 0] = 0.0
    next_states = torch.arange(vocab)[None].expand(vocab, -1).clone()
    next_states[:, 0] = torch.arange(vocab)
    final = -torch.rand(vocab, generator=generator) * 2.0
    return TableScorer(scores, next_states, final, language_model=True)


def table_scorer_walk(scorer: TableScorer, tokens) -> tuple[float, int]:
    """The unweighted float64 score of a token sequence up to its last token and the state it ends in."""
    state, total = 0, 0.0
    for token in tokens:
        total += float(scorer.scores[state, token].double())
        state = int(scorer.next_states[state, token])
    return total, state


def scorer_bonus(scorer: TableScorer, weight: float):
    """The `greedy_references` bonus of a weighted table scorer: tokens so far -> (V,) float64."""
    return lambda tokens: weight * scorer.scores[table_scorer_walk(scorer, tokens)[1]].double()


def weighted_final(scorer: TableScorer, weight: float, tokens) -> float:
    """The weighted final score of the state a token sequence ends in."""
    return weight * float(scorer.final_table[table_scorer_walk(scorer, tokens)[1]])
