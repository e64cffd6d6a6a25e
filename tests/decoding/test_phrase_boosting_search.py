"""Phrase boosting inside the searches: an unpruned beam finds the sequence of the best log-probability plus
boosting total (enumerated), and greedy search with boosting emits the boosted phrase."""

from __future__ import annotations

import pytest
from test_beam_search import sequence_log_probs
from test_phrase_boosting import reference_totals
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import WeightedScorer, beam_search, greedy_search
from asr_plugin.decoding.phrase_boosting import PhraseBoosting, PhraseGraph


def test_unpruned_boosted_beam_finds_the_best_boosted_sequence() -> None:
    model = tiny_transducer(vocab_size=3, seed=1)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=4, seed=1)
    phrases = [((2, 1), 1.5), ((1, 1, 2), 1.0)]
    fusion = [WeightedScorer(PhraseBoosting(PhraseGraph.build(phrases, 3)), 1.0)]
    hyps = beam_search(model, encoder_out, lengths, beam=31, max_symbols_per_frame=1, fusion=fusion)
    changed = 0
    for b, hyp in enumerate(hyps):
        totals = sequence_log_probs(model, encoder_out[b, : lengths[b]])
        boosted = {tokens: logp + reference_totals(phrases, list(tokens))[-1] for tokens, logp in totals.items()}
        best = max(boosted, key=boosted.get)
        assert tuple(hyp.tokens) == best
        assert hyp.score == pytest.approx(boosted[best], abs=1e-5)
        changed += best != max(totals, key=totals.get)
    assert changed > 0


def test_greedy_with_boosting_emits_the_phrase() -> None:
    model = tiny_transducer(seed=0)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=12, seed=0)
    phrase = (3, 5)
    boosting = PhraseBoosting(PhraseGraph.build([(phrase, 4.0)], model.vocab_size))
    plain = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2)
    boosted = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2, fusion=[WeightedScorer(boosting, 1)])

    def count(tokens: list[int]) -> int:
        return sum(tuple(tokens[i : i + 2]) == phrase for i in range(len(tokens) - 1))

    assert sum(count(h.tokens) for h in boosted) > sum(count(h.tokens) for h in plain)
