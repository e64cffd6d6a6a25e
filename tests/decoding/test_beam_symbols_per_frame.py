"""Beam search with up to S symbols per frame: beam-1 equals greedy with the same S, unpruned beams find the
exact best sequence of that topology, batching, defaults and argument errors."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import beam_search, greedy_search


@pytest.mark.parametrize("max_symbols", [1, 2, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy_with_the_same_cap(seed: int, max_symbols: int, tokenizer) -> None:
    model = tiny_transducer(seed=seed)
    encoder_out, lengths = random_encoder_out(model, batch=5, frames=12, seed=seed)
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=max_symbols, tokenizer=tokenizer)
    beam = beam_search(model, encoder_out, lengths, beam=1, tokenizer=tokenizer, max_symbols_per_frame=max_symbols)
    assert sum(len(h.tokens) for h in greedy) > 0
    for g, b in zip(greedy, beam, strict=True):
        assert b.tokens == g.tokens
        assert b.timestamps == g.timestamps
        assert b.text == g.text
        assert b.score == pytest.approx(g.score, abs=1e-5)


def test_greedy_comparison_covers_frames_with_several_tokens() -> None:
    model = tiny_transducer(seed=0)
    encoder_out, lengths = random_encoder_out(model, batch=5, frames=12, seed=0)
    stamps = [h.timestamps for h in beam_search(model, encoder_out, lengths, beam=1, max_symbols_per_frame=4)]
    assert any(len(s) > len(set(s)) for s in stamps)


def capped_sequence_log_probs(model, frames: torch.Tensor, max_symbols: int) -> dict[tuple[int, ...], float]:
    """Exhaustive search of one utterance (T, H_e) with up to `max_symbols` tokens per frame, a closing blank
    after fewer: token sequence -> log of the summed probability of its alignments."""
    blank, vocab = model.blank_id, model.vocab_size
    cache: dict[tuple[int, tuple[int, ...]], torch.Tensor] = {}

    def log_probs(t: int, tokens: tuple[int, ...]) -> torch.Tensor:  # (V,)
        if (t, tokens) not in cache:
            context = model.predictor(torch.tensor([list(tokens)], dtype=torch.long))[:, -1:]  # (1, 1, H_p)
            cache[(t, tokens)] = model.joint(frames[t][None, None], context)[0, 0, 0].log_softmax(-1).double()
        return cache[(t, tokens)]

    totals: dict[tuple[int, ...], float] = {}

    def walk(t: int, emitted: int, tokens: tuple[int, ...], logp: float) -> None:
        if t == frames.shape[0]:
            totals[tokens] = float(torch.logaddexp(torch.tensor(totals.get(tokens, -math.inf)), torch.tensor(logp)))
            return
        if emitted == max_symbols:  # the cap: next frame without a blank
            walk(t + 1, 0, tokens, logp)
            return
        scores = log_probs(t, tokens)
        walk(t + 1, 0, tokens, logp + float(scores[blank]))
        for token in range(vocab):
            if token != blank:
                walk(t, emitted + 1, tokens + (token,), logp + float(scores[token]))

    with torch.no_grad():
        walk(0, 0, (), 0.0)
    return totals


def scores_at_least(beam: float, greedy: float) -> bool:
    """beam >= greedy up to float32 summation order: the searches add the same log-probs in different orders
    (and batch shapes), so equal paths can differ in the last bits on another CPU."""
    return beam >= greedy - 1e-5 * max(1.0, abs(greedy))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unpruned_beam_finds_the_exact_best_sequence_and_beats_greedy(seed: int) -> None:
    model = tiny_transducer(vocab_size=3, seed=seed)
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=4, seed=seed)
    # At most 2 ** 9 - 1 token sequences of length <= 8, each finished or active: nothing is pruned.
    hyps = beam_search(model, encoder_out, lengths, beam=1024, max_symbols_per_frame=2)
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2)
    for b, hyp in enumerate(hyps):
        totals = capped_sequence_log_probs(model, encoder_out[b, : lengths[b]], max_symbols=2)
        best = max(totals, key=totals.get)
        assert tuple(hyp.tokens) == best
        assert hyp.score == pytest.approx(totals[best], abs=1e-5)
        assert scores_at_least(hyp.score, greedy[b].score)


@pytest.mark.parametrize("max_symbols", [2, 4])
@pytest.mark.parametrize("seed", [3, 4])
def test_large_beam_scores_at_least_greedy(seed: int, max_symbols: int) -> None:
    model = tiny_transducer(seed=seed)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=10, seed=seed)
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=max_symbols)
    beam = beam_search(model, encoder_out, lengths, beam=16, max_symbols_per_frame=max_symbols)
    for g, b in zip(greedy, beam, strict=True):
        assert scores_at_least(b.score, g.score)
        assert len(b.timestamps) == len(b.tokens) and b.timestamps == sorted(b.timestamps)
        assert all(b.timestamps.count(t) <= max_symbols for t in set(b.timestamps))


def test_batches_like_single_utterances_and_checks_arguments(tokenizer) -> None:
    model = tiny_transducer(seed=7)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=10, seed=7)
    lengths[2] = 0
    batched = beam_search(model, encoder_out, lengths, beam=4, tokenizer=tokenizer, max_symbols_per_frame=3)
    for b, hyp in enumerate(batched):
        single = beam_search(
            model, encoder_out[b : b + 1], lengths[b : b + 1], beam=4, tokenizer=tokenizer, max_symbols_per_frame=3
        )[0]
        assert hyp.tokens == single.tokens and hyp.timestamps == single.timestamps and hyp.text == single.text
        assert hyp.score == pytest.approx(single.score, abs=1e-5)
    assert batched[2].tokens == [] and batched[2].score == 0.0
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        beam_search(model, encoder_out, lengths, beam=4, max_symbols_per_frame=0)


def test_default_cap_is_greedy_default() -> None:
    cap = inspect.signature(beam_search).parameters["max_symbols_per_frame"].default
    assert cap == inspect.signature(greedy_search).parameters["max_symbols_per_frame"].default == 10
