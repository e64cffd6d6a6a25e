"""Greedy search of TDT models (durations skip frames) against a plain per-utterance reference of NeMo's TDT
greedy_batch rules; beam search refuses TDT models."""

from __future__ import annotations

import pytest
import torch
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import decode, greedy_search, modified_beam_search

DURATIONS = [0, 1, 2, 3, 4]


def tdt_model(seed: int):
    """A tiny TDT model whose joint often predicts duration 0 for tokens (several tokens per frame)."""
    model = tiny_transducer(seed=seed, lattice={"kind": "tdt", "durations": DURATIONS})
    with torch.no_grad():
        vocab = model.vocab_size
        model.joint.output.bias[vocab:] = torch.tensor([0.8, 0.5, 0.0, -0.2, -0.4])  # duration scores
    return model


@torch.no_grad()
def reference_tdt_greedy(model, frames: torch.Tensor, max_symbols: int) -> tuple[list[int], list[int], float]:
    """One utterance, one step at a time, as NeMo's TDT greedy_batch does: (T, H_e) -> tokens, timestamps, score.

    At frame t the best token k and best duration d (a blank with d = 0 takes 1); t += d; after a blank,
    read again at the new frame with the same predictor state until a token or the end; a token is emitted
    at the frame it was read at; max_symbols tokens at one frame with t still there move t on by one."""
    vocab, blank = model.vocab_size, model.blank_id
    out, state = model.predictor.step(torch.tensor([blank]))
    tokens, stamps, score = [], [], 0.0
    t, last_frame, count = 0, -1, 0
    num_frames = frames.shape[0]

    def read(t: int) -> tuple[int, int, float]:
        logits = model.joint(frames[t][None, None], out[:, None])[0, 0, 0].double()  # (V + D,)
        token_logp, duration_logp = logits[:vocab].log_softmax(-1), logits[vocab:].log_softmax(-1)
        k, i = int(token_logp.argmax()), int(duration_logp.argmax())
        if k == blank and DURATIONS[i] == 0:
            i = DURATIONS.index(1)
        return k, DURATIONS[i], float(token_logp[k] + duration_logp[i])

    while t < num_frames:
        found_at = t
        k, d, s = read(t)
        score, t = score + s, t + d
        while k == blank and t < num_frames:
            found_at = t
            k, d, s = read(t)
            score, t = score + s, t + d
        if k != blank:
            tokens.append(k)
            stamps.append(found_at)
            out, state = model.predictor.step(torch.tensor([k]), state)
            count = count + 1 if found_at == last_frame else 1
            last_frame = found_at
            if t < num_frames and count >= max_symbols and last_frame == t:
                t += 1
    return tokens, stamps, score


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


def test_beam_search_refuses_tdt_models() -> None:
    model = tdt_model(0)
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=6, seed=0)
    with pytest.raises(
        ValueError, match=r"decodes RNN-T models only, not this model's lattice TDT\(durations=.*use greedy"
    ):
        modified_beam_search(model, encoder_out, lengths)
    with pytest.raises(ValueError, match="decodes RNN-T models only"):
        decode(model, encoder_out, lengths, "beam")
    assert [h.tokens for h in decode(model, encoder_out, lengths, "greedy")] == [
        h.tokens for h in greedy_search(model, encoder_out, lengths)
    ]
