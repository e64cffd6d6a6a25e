"""Shallow fusion in streaming greedy decoding: chunks of any size give the offline fused search, and a reset (an
endpoint) starts the stream's scorers afresh as it does its predictor; a recogniser with fusion gives the offline
fused transcript."""

from __future__ import annotations

import pytest
import torch
from fusion_toys import favouring_scorer
from test_recognizer import audio_batch, audio_session, offline_encoding, stream_audio
from test_streaming_greedy import chunk_schedule, decode_in_steps, peaked_model, ragged_batch
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import BufferedEncoder, StreamingGreedyDecoder, greedy_search
from asr_plugin.decoding.fusion import WeightedScorer

FAVOURED = 2


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
@pytest.mark.parametrize("chunk", [1, 3])
def test_streamed_fused_greedy_equals_offline_fused_greedy(lattice: str, chunk: int) -> None:
    model = peaked_model(lattice, 0)
    encoder_out, lengths = ragged_batch(model, 0)
    fusion = [WeightedScorer(favouring_scorer(model.vocab_size, FAVOURED), 1.5)]
    offline = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2, fusion=fusion)
    plain = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2)
    decoder = StreamingGreedyDecoder(model, 2, fusion=fusion)
    state = decode_in_steps(decoder, encoder_out, chunk_schedule(lengths, chunk))
    for hyp, want in zip(decoder.hypotheses(state), offline, strict=True):
        assert (hyp.tokens, hyp.timestamps) == (want.tokens, want.timestamps)
        assert hyp.score == pytest.approx(want.score, abs=1e-6)
    assert [h.tokens for h in offline] != [h.tokens for h in plain]  # the scorer changed the search


def test_a_reset_starts_the_scorers_afresh() -> None:
    model = peaked_model("rnnt", 1)
    encoder_out, _ = random_encoder_out(model, batch=2, frames=16, seed=1)
    scorer = favouring_scorer(model.vocab_size, FAVOURED, bonus=3.0)
    decoder = StreamingGreedyDecoder(model, 1, fusion=[WeightedScorer(scorer, 1.0)])
    state = decoder.initial_state(2)
    frame = 0
    while int(state.scorer_states[0][0]) != 1:  # until stream 0 has just emitted the favoured token
        state = decoder.step(encoder_out[:, frame : frame + 1], torch.ones(2, dtype=torch.long), state)
        frame += 1
        assert frame < 12, "the case must emit the favoured token early"
    other_state = int(state.scorer_states[0][1])
    state = decoder.reset(state, torch.tensor([True, False]))
    assert state.scorer_states[0].tolist() == [0, other_state]
    rest = encoder_out[:1, frame:]
    state = decoder.step(encoder_out[:, frame:], torch.tensor([rest.shape[1], 0]), state)
    fresh = decoder.initial_state(1)
    fresh = decoder.step(rest, torch.tensor([rest.shape[1]]), fresh)
    continued, alone = decoder.hypotheses(state)[0], decoder.hypotheses(fresh)[0]
    assert continued.tokens == alone.tokens
    assert continued.timestamps == [t + frame for t in alone.timestamps]
    assert continued.score == pytest.approx(alone.score, abs=1e-6)


def test_a_recogniser_with_fusion_gives_the_offline_fused_transcript() -> None:
    model = tiny_transducer(num_layers=1, attention="rel_pos", subsampling="striding", seed=3)
    audio, lengths = audio_batch([16000, 7000])
    fusion = [WeightedScorer(favouring_scorer(model.vocab_size, FAVOURED, bonus=3.0), 1.0)]
    session = audio_session(model, BufferedEncoder(model, 16, 400, 400), max_symbols_per_frame=3, fusion=fusion)
    state, _ = stream_audio(session, audio, lengths)
    encoded = offline_encoding(model, audio, lengths)
    offline = greedy_search(model, *encoded, 3, fusion=fusion)
    assert [h.tokens for h in offline] != [h.tokens for h in greedy_search(model, *encoded, 3)]
    for segments, want in zip(session.segments(state), offline, strict=True):
        assert [s.hypothesis.tokens for s in segments] == [want.tokens]
