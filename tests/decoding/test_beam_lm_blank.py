"""The fused beam search's blank scoring with a language model (`blank_lm_score_mode`, NeMo's ``malsd_batch``
option): unpruned beams, RNN-T and TDT, against float64 enumerations of every alignment with the scores written
out by hand (``lm_weighted_full``: blank (1 + a) log P(blank), tokens + a log(1 - P(blank)); ``no_score``: the
blank the joint's alone; with and without the LM's final score), the per-symbol formula on values, what counts as
a language model, errors."""

from __future__ import annotations

import math

import pytest
import torch
from fusion_toys import bigram_scorer, favouring_scorer, table_scorer_walk, weighted_final
from test_beam_search import sequence_log_probs
from test_tdt_beam_search import SMALL_DURATIONS, tdt_sequence_log_probs
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import beam_search
from asr_plugin.decoding.fusion import WeightedScorer, final_scores, language_model_weight, lm_weighted_blank

WEIGHT = 1.5


def hand_step_scores(scorer, weight: float, mode: str):
    """The per-symbol scores a fused search adds, written out: (V,) float64 log-probabilities, tokens so far ->
    (V,) (blank id 0)."""

    def scores(token_logp: torch.Tensor, tokens) -> torch.Tensor:
        lm = scorer.scores[table_scorer_walk(scorer, tokens)[1]].double()
        out = token_logp + weight * lm
        if mode == "lm_weighted_full":
            p_blank = math.exp(float(token_logp[0]))
            out = out + weight * math.log(1.0 - min(p_blank, 0.99))
            out[0] = (1.0 + weight) * token_logp[0]
        else:
            out[0] = token_logp[0]
        return out

    return scores


def unpruned_case(lattice: str):
    """(model, frames, beam, max_symbols, enumeration(model, frames, step_scores)) with a beam that prunes nothing."""
    if lattice == "rnnt":  # one symbol per frame, 4 frames: 1 + 2 + 4 + 8 + 16 prefixes
        return tiny_transducer(vocab_size=3, seed=0), 4, 31, 1, sequence_log_probs
    # one token per frame: where a larger cap binds, merged hypotheses keep one count (approximate)
    model = tiny_transducer(vocab_size=3, seed=1, lattice={"kind": "tdt", "durations": SMALL_DURATIONS})
    return model, 3, 512, 1, lambda m, f, s: tdt_sequence_log_probs(m, f, 1, s)


def best_sequences(model, encoder_out, lengths, enumerate_sequences, scorer, mode, lm_final=True):
    """Each utterance's (best token sequence, its fused total) by enumeration; `lm_final`: with the LM's final
    score."""
    best = []
    for b in range(encoder_out.shape[0]):
        totals = enumerate_sequences(model, encoder_out[b, : lengths[b]], hand_step_scores(scorer, WEIGHT, mode))
        fused = {
            tokens: total + (weighted_final(scorer, WEIGHT, tokens) if lm_final else 0.0)
            for tokens, total in totals.items()
        }
        top = max(fused, key=fused.get)
        best.append((top, fused[top]))
    return best


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_unpruned_beam_maximises_the_enumerated_score_of_each_blank_mode(lattice: str) -> None:
    model, frames, beam, max_symbols, enumerate_sequences = unpruned_case(lattice)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=frames, seed=0)
    scorer = bigram_scorer(3, seed=2)
    fusion = [WeightedScorer(scorer, WEIGHT)]
    found = {}
    for mode, lm_final in [("lm_weighted_full", True), ("no_score", True), ("lm_weighted_full", False)]:
        hyps = beam_search(
            model,
            encoder_out,
            lengths,
            beam,
            max_symbols_per_frame=max_symbols,
            fusion=fusion,
            blank_lm_score_mode=mode,
            lm_final=lm_final,
            score_norm=False,  # the enumeration's choice by total (test_fusion_search.py: normalised)
        )
        expected = best_sequences(model, encoder_out, lengths, enumerate_sequences, scorer, mode, lm_final)
        for hyp, (tokens, total) in zip(hyps, expected, strict=True):
            assert tuple(hyp.tokens) == tokens
            assert hyp.score == pytest.approx(total, abs=1e-5)
        found[mode, lm_final] = [tuple(h.tokens) for h in hyps]
    assert found["lm_weighted_full", True] != found["no_score", True]  # the blank's scoring changed a result
    default = beam_search(
        model, encoder_out, lengths, beam, max_symbols_per_frame=max_symbols, fusion=fusion, score_norm=False
    )
    assert [tuple(h.tokens) for h in default] == found["lm_weighted_full", True]


def test_lm_weighted_blank_on_values() -> None:
    p = torch.tensor([[0.5, 0.3, 0.2], [0.995, 0.004, 0.001]], dtype=torch.float64)
    out = lm_weighted_blank(p.log(), 0.5, blank_id=0)
    expected = p.log() + 0.5 * torch.tensor([[math.log(0.5)], [math.log(0.01)]], dtype=torch.float64)  # P capped
    expected[:, 0] = 1.5 * p[:, 0].log()
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    same = p.log()
    assert lm_weighted_blank(same, 0.0, blank_id=0) is same


def test_only_language_models_weight_the_blank() -> None:
    lm, booster = bigram_scorer(5, seed=0), favouring_scorer(5, 2)
    assert language_model_weight([WeightedScorer(lm, 0.3), WeightedScorer(booster, 2.0), WeightedScorer(lm, 0.2)]) == (
        pytest.approx(0.5)
    )
    assert language_model_weight([WeightedScorer(booster, 2.0)]) == 0.0


def test_lm_final_leaves_out_only_the_language_models_final_scores() -> None:
    lm, booster = bigram_scorer(5, seed=0), favouring_scorer(5, 2)
    fusion = [WeightedScorer(lm, 0.5), WeightedScorer(booster, 2.0)]
    states = (torch.tensor([[3, 1]]), torch.tensor([[1, 0]]))
    booster_final = 2.0 * booster.final_table[states[1]].double()
    torch.testing.assert_close(final_scores(fusion, states, lm_final=False), booster_final)
    torch.testing.assert_close(final_scores(fusion, states), booster_final + 0.5 * lm.final_table[states[0]].double())


def test_an_unknown_blank_mode_is_refused_naming_it() -> None:
    model = tiny_transducer(seed=0)
    encoder_out, lengths = random_encoder_out(model, batch=1, frames=3, seed=0)
    with pytest.raises(ValueError, match=r"blank_lm_score_mode='lm_weighted'.*'no_score'"):
        beam_search(model, encoder_out, lengths, blank_lm_score_mode="lm_weighted")
