"""Greedy search of TDT models (durations skip frames) against a plain per-utterance reference of NeMo's TDT
greedy_batch rules."""

from __future__ import annotations

import pytest
from greedy_references import reference_tdt_greedy, tdt_model
from tiny_models import random_encoder_out

from asr_plugin.decoding import greedy_search


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("max_symbols", [1, 2, 4])
def test_batched_tdt_greedy_matches_reference(seed: int, max_symbols: int) -> None:
    model = tdt_model(seed)
    encoder_out, lengths = random_encoder_out(model, batch=5, frames=12, seed=seed)
    lengths[1] = 0  # an empty utterance decodes to nothing
    hyps = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=max_symbols)
    emitted = skipped = same_frame = 0
    for b, hyp in enumerate(hyps):
        tokens, stamps, score = reference_tdt_greedy(model, encoder_out[b, : lengths[b]], max_symbols)
        assert hyp.tokens == tokens and hyp.timestamps == stamps, b
        assert hyp.score == pytest.approx(score, rel=1e-5, abs=1e-5)
        emitted += len(tokens)
        same_frame += sum(a == b for a, b in zip(stamps, stamps[1:]))
        skipped += sum(b - a > 1 for a, b in zip(stamps, stamps[1:]))
    assert hyps[1].tokens == []
    assert emitted > 10 and skipped, "the case must emit tokens and skip frames"
    assert bool(same_frame) == (max_symbols > 1), "several tokens at one frame exactly when the cap allows it"


def test_max_symbols_caps_tokens_per_frame() -> None:
    model = tdt_model(3)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=10, seed=3)
    for cap in (1, 2):
        for hyp in greedy_search(model, encoder_out, lengths, max_symbols_per_frame=cap):
            assert all(hyp.timestamps.count(t) <= cap for t in set(hyp.timestamps))
