"""Beam search with up to S symbols per frame: beam-1 equals greedy with the same S, hypotheses that differ only in
the tokens emitted at their frame are merged, batching, defaults and argument errors."""

from __future__ import annotations

import inspect

import pytest
import torch
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import beam_search, greedy_search
from asr_plugin.decoding.beam_search import NEG_INF, BatchedBeamSearch


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


def scores_at_least(beam: float, greedy: float) -> bool:
    """beam >= greedy up to float32 summation order: the searches add the same log-probs in different orders
    (and batch shapes), so equal paths can differ in the last bits on another CPU."""
    return beam >= greedy - 1e-5 * max(1.0, abs(greedy))


@torch.no_grad()
def test_hypotheses_differing_only_in_tokens_at_their_frame_are_merged() -> None:
    """Two alignments of the same tokens reaching the same frame with different numbers of tokens emitted there
    are one hypothesis after the merge (NeMo's recombination), which keeps its best member's count."""
    model = tiny_transducer(vocab_size=3, seed=0)
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=4, seed=0)
    search = BatchedBeamSearch(model, beam=64, max_symbols_per_frame=2)
    frames, lengths = search.decoder.project_frames(encoder_out), lengths[:, None]
    beams, twins = search.initial_beams(2, encoder_out.device), 0
    while bool(((beams.time < lengths) & (beams.scores > NEG_INF)).any()):
        advanced = search.advance(beams.with_room(), frames, lengths)
        beams = search.merge(advanced, lengths)
        for b in range(2):
            before, after = live_hypotheses(advanced, b), live_hypotheses(beams, b)
            assert len(set(key for key, _, _ in after)) == len(after)  # no two share tokens and frame pointer
            for key, count, score in after:
                members = [(s, c) for k, c, s in before if k == key]
                assert count == max(members)[1] and score == pytest.approx(
                    torch.tensor([s for s, _ in members]).logsumexp(0).item()
                )
                twins += len({c for _, c in members}) > 1
    assert twins > 0  # the case arose


def live_hypotheses(beams, b: int) -> list[tuple[tuple[tuple[int, ...], int], int, float]]:
    """((tokens, frame pointer), tokens at that frame, score) of utterance b's live hypotheses."""
    return [
        (
            (tuple(beams.labels[b, k, : beams.lengths[b, k]].tolist()), int(beams.time[b, k])),
            int(beams.tokens_at_frame[b, k]),
            float(beams.scores[b, k]),
        )
        for k in range(beams.scores.shape[1])
        if beams.scores[b, k] > NEG_INF
    ]


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
