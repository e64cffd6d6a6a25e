"""Beam search of TDT models: beam 1 equals greedy search, an unpruned beam finds the exact best token sequence of
the (token, duration) topology (by enumeration), batching, `decode(..., "beam")`."""

from __future__ import annotations

import math

import pytest
import torch
from beam_references import unpruned_choice
from greedy_references import tdt_model
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import beam_search, decode, greedy_search

SMALL_DURATIONS = [0, 1, 2]


@pytest.mark.parametrize("max_symbols", [1, 2, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_tdt_greedy(seed: int, max_symbols: int, tokenizer) -> None:
    model = tdt_model(seed)
    encoder_out, lengths = random_encoder_out(model, batch=5, frames=12, seed=seed)
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=max_symbols, tokenizer=tokenizer)
    beam = beam_search(model, encoder_out, lengths, beam=1, tokenizer=tokenizer, max_symbols_per_frame=max_symbols)
    assert sum(len(h.tokens) for h in greedy) > 10
    for g, b in zip(greedy, beam, strict=True):
        assert (b.tokens, b.timestamps, b.text) == (g.tokens, g.timestamps, g.text)
        assert b.score == pytest.approx(g.score, abs=1e-5)


def tdt_sequence_log_probs(
    model, frames: torch.Tensor, max_symbols: int, step_scores=None
) -> dict[tuple[int, ...], float]:
    """Every alignment of one utterance (T, H_e) under TDT's topology, float64: (token, duration) steps, blank
    never with duration 0, the cap moving on one frame without a blank -> token sequence -> log summed prob.
    `step_scores` (optional): (V,) float64 token log-probabilities, tokens so far -> (V,) the token scores the
    search adds instead (a fused search's; durations untouched)."""
    blank, vocab, num_frames = model.blank_id, model.vocab_size, frames.shape[0]
    totals: dict[tuple[int, ...], float] = {}

    def walk(t: int, emitted: int, tokens: tuple[int, ...], logp: float) -> None:
        if t >= num_frames:
            totals[tokens] = float(torch.logaddexp(torch.tensor(totals.get(tokens, -math.inf)), torch.tensor(logp)))
            return
        context = model.predictor(torch.tensor([list(tokens)], dtype=torch.long))[:, -1:]  # (1, 1, H_p)
        logits = model.joint(frames[t][None, None], context)[0, 0, 0].double()
        token_logp, duration_logp = logits[:vocab].log_softmax(-1), logits[vocab:].log_softmax(-1)
        if step_scores is not None:
            token_logp = step_scores(token_logp, tokens)
        for d, duration in enumerate(SMALL_DURATIONS):
            step = float(duration_logp[d])
            if duration > 0:
                walk(t + duration, 0, tokens, logp + float(token_logp[blank]) + step)
            for token in range(vocab):
                if token == blank:
                    continue
                score = logp + float(token_logp[token]) + step
                if duration > 0:
                    walk(t + duration, 0, tokens + (token,), score)
                elif emitted + 1 >= max_symbols:
                    walk(t + 1, 0, tokens + (token,), score)
                else:
                    walk(t, emitted + 1, tokens + (token,), score)

    with torch.no_grad():
        walk(0, 0, (), 0.0)
    return totals


@pytest.mark.parametrize("score_norm", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_unpruned_tdt_beam_finds_the_exact_best_sequence(seed: int, score_norm: bool) -> None:
    max_symbols = 1  # a larger cap is approximate where it binds (merged hypotheses keep one count)
    model = tiny_transducer(vocab_size=3, seed=seed, lattice={"kind": "tdt", "durations": SMALL_DURATIONS})
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=3, seed=seed)
    hyps = beam_search(model, encoder_out, lengths, beam=512, max_symbols_per_frame=max_symbols, score_norm=score_norm)
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=max_symbols)
    for b, hyp in enumerate(hyps):
        totals = tdt_sequence_log_probs(model, encoder_out[b, : lengths[b]], max_symbols)
        best = unpruned_choice(totals, score_norm)
        assert len(totals) > 3
        assert tuple(hyp.tokens) == best
        assert hyp.score == pytest.approx(totals[best], abs=1e-5)
        if not score_norm:  # the most probable sequence; a normalised choice may be less probable than greedy's
            assert hyp.score >= greedy[b].score - 1e-5


def test_tdt_beam_batches_like_single_utterances_and_decodes_by_name(tokenizer) -> None:
    model = tdt_model(4)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=10, seed=4)
    lengths[2] = 0
    batched = decode(model, encoder_out, lengths, "beam", tokenizer, beam=4, max_symbols_per_frame=3)
    for b, hyp in enumerate(batched):
        single = beam_search(model, encoder_out[b : b + 1], lengths[b : b + 1], beam=4, max_symbols_per_frame=3)[0]
        assert (hyp.tokens, hyp.timestamps) == (single.tokens, single.timestamps)
        assert hyp.score == pytest.approx(single.score, abs=1e-5)
        assert hyp.text == tokenizer.decode(hyp.tokens)
    assert batched[2].tokens == [] and batched[2].score == 0.0
    assert any(b - a > 1 for hyp in batched for a, b in zip(hyp.timestamps, hyp.timestamps[1:])), "durations skip"
