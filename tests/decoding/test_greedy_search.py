"""Batched greedy search against a plain per-utterance reference."""

from __future__ import annotations

import math

import pytest
import torch
from greedy_references import reference_greedy
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import greedy_search


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("max_symbols", [1, 3])
def test_batched_greedy_matches_reference(seed: int, max_symbols: int) -> None:
    model = tiny_transducer(seed=seed)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=9, seed=seed)
    hyps = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=max_symbols)
    assert len(hyps) == 4
    emitted = 0
    with torch.no_grad():
        for b, hyp in enumerate(hyps):
            tokens, stamps, score = reference_greedy(model, encoder_out[b, : lengths[b]], max_symbols)
            assert hyp.tokens == tokens
            assert hyp.timestamps == stamps
            assert hyp.score == pytest.approx(score, abs=1e-4)
            assert hyp.text is None
            emitted += len(tokens)
    assert emitted > 0, "test model emits only blanks; the comparison would be vacuous"


def test_greedy_text_and_score_is_a_log_probability(tokenizer) -> None:
    model = tiny_transducer()
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=6, seed=5)
    for hyp in greedy_search(model, encoder_out, lengths, tokenizer=tokenizer):
        assert hyp.text == tokenizer.decode(hyp.tokens)
        assert 0 not in hyp.tokens
        assert hyp.score <= 0.0 and math.isfinite(hyp.score)


def test_greedy_handles_zero_length_and_rejects_bad_input() -> None:
    model = tiny_transducer()
    encoder_out = torch.randn(2, 5, model.encoder.output_dim)
    hyps = greedy_search(model, encoder_out, torch.tensor([0, 5]))
    assert hyps[0].tokens == [] and hyps[0].score == 0.0
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        greedy_search(model, encoder_out, torch.tensor([5, 5]), max_symbols_per_frame=0)
    with pytest.raises(ValueError, match="encoder_lengths"):
        greedy_search(model, encoder_out, torch.tensor([6, 5]))
    with pytest.raises(ValueError, match="encoder_out"):
        greedy_search(model, encoder_out[0], torch.tensor([5]))
