"""Shallow fusion in greedy and beam search, RNN-T and TDT, with a hand-written two-state scorer: against the plain
float64 references with the scorer's bonus (greedy: NeMo's rule, the joint decides blank or token; a width-1
beam: the blank competes with the fused tokens), enumeration of the fused score, zero weight changes nothing,
errors."""

from __future__ import annotations

import math

import pytest
import torch
from beam_references import unpruned_choice
from fusion_toys import favouring_scorer, penalty_scorer, scorer_bonus, table_scorer_walk, weighted_final
from greedy_references import reference_greedy, reference_tdt_greedy, tdt_model
from test_beam_search import sequence_log_probs
from test_tdt_beam_search import SMALL_DURATIONS, tdt_sequence_log_probs
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import beam_search, decode, greedy_search
from asr_plugin.decoding.fusion import WeightedScorer

FAVOURED = 2  # the token the toy scorer favours


def fused_total(scorer, weight: float, tokens, log_prob: float) -> float:
    """log P(tokens) + weight x (the scorer's token scores + its final score)."""
    return log_prob + weight * table_scorer_walk(scorer, tokens)[0] + weighted_final(scorer, weight, tokens)


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_fused_greedy_equals_the_plain_reference_with_the_scorers_bonus(lattice: str) -> None:
    model = tiny_transducer(seed=3) if lattice == "rnnt" else tdt_model(3)
    reference = reference_greedy if lattice == "rnnt" else reference_tdt_greedy
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=10, seed=3)
    scorer, weight = favouring_scorer(model.vocab_size, FAVOURED), 1.3
    fusion = [WeightedScorer(scorer, weight)]
    plain = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=3)
    fused = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=3, fusion=fusion)
    bonus = scorer_bonus(scorer, weight)
    for b, hyp in enumerate(fused):
        with torch.no_grad():
            tokens, stamps, score = reference(model, encoder_out[b, : lengths[b]], 3, bonus)
        assert (hyp.tokens, hyp.timestamps) == (tokens, stamps)
        assert hyp.score == pytest.approx(score + weighted_final(scorer, weight, tokens), abs=1e-4)
    favoured = sum(h.tokens.count(FAVOURED) for h in fused), sum(h.tokens.count(FAVOURED) for h in plain)
    assert favoured[0] > favoured[1]  # the scorer changed the search


@pytest.mark.parametrize("method", ["greedy", "beam"])
@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_zero_weight_fusion_changes_nothing_bit_for_bit(method: str, lattice: str) -> None:
    model = tiny_transducer(seed=1) if lattice == "rnnt" else tdt_model(1)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=9, seed=1)
    fusion = [WeightedScorer(favouring_scorer(model.vocab_size, FAVOURED), 0.0)]
    plain = decode(model, encoder_out, lengths, method, beam=3)
    zero = decode(model, encoder_out, lengths, method, beam=3, fusion=fusion)
    for p, z in zip(plain, zero, strict=True):
        assert (p.tokens, p.timestamps, p.durations, p.score) == (z.tokens, z.timestamps, z.durations, z.score)


@pytest.mark.parametrize("score_norm", [False, True])
@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_unpruned_fused_beam_finds_the_best_fused_sequence(lattice: str, score_norm: bool) -> None:
    if lattice == "rnnt":  # one symbol per frame, 4 frames: 31 prefixes, no pruning
        model, frames, beam, max_symbols = tiny_transducer(vocab_size=3, seed=0), 4, 31, 1
        enumerate_sequences = sequence_log_probs
    else:  # one token per frame: where a cap binds, merged hypotheses keep one count (approximate)
        model = tiny_transducer(vocab_size=3, seed=0, lattice={"kind": "tdt", "durations": SMALL_DURATIONS})
        frames, beam, max_symbols = 3, 512, 1

        def enumerate_sequences(model, frames):
            return tdt_sequence_log_probs(model, frames, max_symbols)

    encoder_out, lengths = random_encoder_out(model, batch=2, frames=frames, seed=0)
    scorer, weight = favouring_scorer(3, FAVOURED, bonus=2.0), 1.0
    fusion = [WeightedScorer(scorer, weight)]
    hyps = beam_search(
        model, encoder_out, lengths, beam=beam, max_symbols_per_frame=max_symbols, fusion=fusion, score_norm=score_norm
    )
    changed = 0
    for b, hyp in enumerate(hyps):
        totals = enumerate_sequences(model, encoder_out[b, : lengths[b]])
        fused = {tokens: fused_total(scorer, weight, tokens, logp) for tokens, logp in totals.items()}
        best = unpruned_choice(fused, score_norm)  # the fused total, final scores included, is what is normalised
        assert tuple(hyp.tokens) == best
        assert hyp.score == pytest.approx(fused[best], abs=1e-5)
        changed += best != unpruned_choice(totals, score_norm)
    assert changed > 0  # the scorer changed the best sequence


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_fused_greedy_leaves_blank_or_token_to_the_joint(lattice: str) -> None:
    model = tiny_transducer(seed=2) if lattice == "rnnt" else tdt_model(2)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=10, seed=2)
    cost = 3.0  # the same for every token: it cannot change which token, only (blank competing) whether one
    fusion = [WeightedScorer(penalty_scorer(model.vocab_size, cost), 1.0)]
    plain = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2)
    fused = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2, fusion=fusion)
    for p, f in zip(plain, fused, strict=True):
        assert (f.tokens, f.timestamps, f.durations) == (p.tokens, p.timestamps, p.durations)
        assert f.score == pytest.approx(p.score - cost * len(p.tokens), abs=1e-4)


def test_fused_beam_one_is_the_greedy_search_whose_blank_competes_with_the_fused_tokens() -> None:
    model = tiny_transducer(seed=2)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=10, seed=2)
    scorer, weight = penalty_scorer(model.vocab_size, 3.0), 1.0
    fusion = [WeightedScorer(scorer, weight)]
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2, fusion=fusion)
    beam = beam_search(model, encoder_out, lengths, beam=1, max_symbols_per_frame=2, fusion=fusion)
    bonus = scorer_bonus(scorer, weight)
    for b, hyp in enumerate(beam):
        with torch.no_grad():
            tokens, stamps, score = reference_greedy(model, encoder_out[b, : lengths[b]], 2, bonus, True)
        assert (hyp.tokens, hyp.timestamps) == (tokens, stamps)
        assert hyp.score == pytest.approx(score, abs=1e-5)
    assert sum(map(len, (h.tokens for h in beam))) < sum(map(len, (h.tokens for h in greedy)))  # blanks won


def test_two_scorers_add_their_weighted_scores() -> None:
    model = tiny_transducer(seed=4)
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=8, seed=4)
    scorer = favouring_scorer(model.vocab_size, FAVOURED)
    twice = [WeightedScorer(scorer, 0.6), WeightedScorer(scorer, 0.6)]
    once = [WeightedScorer(scorer, 1.2)]
    for method in ("greedy", "beam"):
        a = decode(model, encoder_out, lengths, method, beam=3, fusion=twice)
        b = decode(model, encoder_out, lengths, method, beam=3, fusion=once)
        for x, y in zip(a, b, strict=True):
            assert x.tokens == y.tokens
            assert x.score == pytest.approx(y.score, abs=1e-5)


def test_bad_fusion_is_refused_naming_the_scorer() -> None:
    model = tiny_transducer(seed=0)
    encoder_out, lengths = random_encoder_out(model, batch=1, frames=3, seed=0)
    scorer = favouring_scorer(model.vocab_size, FAVOURED)
    with pytest.raises(ValueError, match=r"fusion\[0\] \(TableScorer\) has weight nan"):
        greedy_search(model, encoder_out, lengths, fusion=[WeightedScorer(scorer, math.nan)])
    with pytest.raises(ValueError, match="V=5 tokens with blank 0; the model has V=7"):
        beam_search(model, encoder_out, lengths, fusion=[WeightedScorer(favouring_scorer(5, FAVOURED), 1.0)])
    with pytest.raises(TypeError, match=r"fusion\[0\] must be a WeightedScorer"):
        greedy_search(model, encoder_out, lengths, fusion=[(scorer, 1.0)])
    with pytest.raises(TypeError, match=r"fusion\[0\] must be a WeightedScorer"):
        greedy_search(model, encoder_out, lengths, fusion=[WeightedScorer(torch.zeros(3), 1.0)])
