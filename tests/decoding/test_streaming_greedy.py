"""Streaming greedy decoding: frames fed in chunks give exactly the offline search (and the plain per-utterance
references) on every utterance of ragged batches, for RNN-T and TDT, several chunk sizes and symbol caps; the
state is a value; a reset starts a fresh segment; bad input is refused by name."""

from __future__ import annotations

import pytest
import torch
from greedy_references import reference_greedy, reference_tdt_greedy, tdt_model
from tiny_models import tiny_transducer

from asr_plugin.decoding import StreamingGreedyDecoder, greedy_search


def peaked_model(lattice: str, seed: int):
    """A tiny model with a sharper joint than `tiny_transducer`'s (as a trained one: confident, several tokens per
    frame); TDT with durations [0, 1, 2, 3, 4] whose jumps cross chunk boundaries."""
    model = tdt_model(seed) if lattice == "tdt" else tiny_transducer(seed=seed)
    with torch.no_grad():
        model.joint.output.weight.mul_(1.5)
    return model


def ragged_batch(model, seed: int, batch: int = 5, frames: int = 17) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, H_e) random frames and (B,) lengths: one full, one of 1 frame, one empty, the rest random."""
    generator = torch.Generator().manual_seed(seed)
    encoder_out = torch.randn(batch, frames, model.encoder.output_dim, generator=generator)
    lengths = torch.randint(2, frames + 1, (batch,), generator=generator)
    lengths[0], lengths[1], lengths[2] = frames, 1, 0
    return encoder_out, lengths


def chunk_schedule(lengths: torch.Tensor, chunk: int) -> list[torch.Tensor]:
    """(B,) new-frame counts of each step when every stream sends `chunk` frames at a time (fewer at its end)."""
    steps, sent = [], torch.zeros_like(lengths)
    while bool((sent < lengths).any()) or not steps:
        count = torch.minimum(lengths - sent, torch.full_like(lengths, chunk))
        steps.append(count)
        sent = sent + count
    return steps


def decode_in_steps(decoder, encoder_out: torch.Tensor, schedule: list[torch.Tensor], watch=None):
    """Runs the decoder over `schedule` ((B,) frame counts per step), each step's frames packed at the front of a
    (B, max count, H_e) tensor; `watch(state)` sees the state after every step."""
    state = decoder.initial_state(encoder_out.shape[0])
    sent = torch.zeros(encoder_out.shape[0], dtype=torch.long)
    for counts in schedule:
        width = int(counts.max())
        chunk = torch.zeros(encoder_out.shape[0], width, encoder_out.shape[2])
        for b in range(encoder_out.shape[0]):
            chunk[b, : counts[b]] = encoder_out[b, sent[b] : sent[b] + counts[b]]
        state = decoder.step(chunk, counts, state)
        sent = sent + counts
        if watch is not None:
            watch(state)
    return state


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 4])
@pytest.mark.parametrize("max_symbols", [1, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_streamed_greedy_equals_offline_greedy(lattice: str, chunk: int, max_symbols: int, seed: int) -> None:
    model = peaked_model(lattice, seed)
    encoder_out, lengths = ragged_batch(model, seed)
    offline = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=max_symbols)
    decoder = StreamingGreedyDecoder(model, max_symbols)
    skips = []
    state = decode_in_steps(
        decoder, encoder_out, chunk_schedule(lengths, chunk), lambda s: skips.append(int(s.frames_to_skip.max()))
    )
    reference = reference_tdt_greedy if lattice == "tdt" else reference_greedy
    same_frame = 0
    for b, (hyp, want) in enumerate(zip(decoder.hypotheses(state), offline)):
        assert (hyp.tokens, hyp.timestamps) == (want.tokens, want.timestamps), b
        assert hyp.score == pytest.approx(want.score, rel=1e-6, abs=1e-6), b
        with torch.no_grad():
            tokens, stamps, score = reference(model, encoder_out[b, : lengths[b]], max_symbols)
        assert (hyp.tokens, hyp.timestamps) == (tokens, stamps), b
        assert hyp.score == pytest.approx(score, rel=1e-5, abs=1e-5), b
        same_frame += sum(x == y for x, y in zip(hyp.timestamps, hyp.timestamps[1:]))
    assert state.frames_done.tolist() == lengths.tolist()
    assert sum(len(h.tokens) for h in offline) > 10, "the case must emit tokens"
    assert bool(same_frame) == (max_symbols > 1), "several tokens at one frame exactly when the cap allows it"
    if lattice == "tdt" and chunk < 4:
        assert max(skips[:-1]) > 0, "some TDT duration must jump into the next chunk"
    else:
        assert lattice == "tdt" or max(skips) == 0  # RNN-T never skips frames


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_streams_with_their_own_chunk_sizes_and_idle_steps(lattice: str) -> None:
    """Each stream sends random numbers of frames per step (0 included): still the offline result."""
    model = peaked_model(lattice, 3)
    encoder_out, lengths = ragged_batch(model, 3, batch=4, frames=20)
    generator = torch.Generator().manual_seed(0)
    schedule, sent = [], torch.zeros_like(lengths)
    while bool((sent < lengths).any()):
        counts = torch.minimum(torch.randint(0, 6, lengths.shape, generator=generator), lengths - sent)
        schedule.append(counts)
        sent = sent + counts
    decoder = StreamingGreedyDecoder(model, 2)
    partial_tokens = []
    state = decode_in_steps(decoder, encoder_out, schedule, lambda s: partial_tokens.append(s.tokens))
    final = decoder.hypotheses(state)
    offline = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2)
    assert [(h.tokens, h.timestamps) for h in final] == [(h.tokens, h.timestamps) for h in offline]
    for tokens in partial_tokens:  # every partial result is a prefix of the final one
        assert all(list(t) == h.tokens[: len(t)] for t, h in zip(tokens, final))


def test_the_state_is_a_value() -> None:
    model = peaked_model("tdt", 0)
    encoder_out, lengths = ragged_batch(model, 0, batch=3, frames=8)
    decoder = StreamingGreedyDecoder(model, 3)
    first = decoder.step(encoder_out[:, :4], lengths.clamp(max=4), decoder.initial_state(3))
    snapshot = (first.tokens, first.time.clone(), first.predictor_proj.clone(), first.predictor_state[0].clone())
    rest = (lengths - 4).clamp(min=0)
    once = decoder.step(encoder_out[:, 4:], rest, first)
    again = decoder.step(encoder_out[:, 4:], rest, first)
    assert first.tokens == snapshot[0] and torch.equal(first.time, snapshot[1])
    assert torch.equal(first.predictor_proj, snapshot[2]) and torch.equal(first.predictor_state[0], snapshot[3])
    assert once.tokens == again.tokens and torch.equal(once.scores, again.scores)


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_reset_starts_a_fresh_segment(lattice: str) -> None:
    """After `reset`, a stream decodes its next frames as a new utterance would (timestamps counted on), while
    the streams not reset go on unchanged."""
    model = peaked_model(lattice, 1)
    encoder_out = torch.randn(2, 16, model.encoder.output_dim, generator=torch.Generator().manual_seed(1))
    decoder = StreamingGreedyDecoder(model, 2)
    full = torch.tensor([16, 16])
    state = decoder.step(encoder_out[:, :8], torch.tensor([8, 8]), decoder.initial_state(2))
    skipped = state.frames_to_skip.tolist()
    state = decoder.reset(state, torch.tensor([True, False]))
    assert state.tokens[0] == () and state.scores[0] == 0 and state.segment_start.tolist() == [8, 0]
    state = decoder.step(encoder_out[:, 8:], torch.tensor([8, 8]), state)
    fresh = greedy_search(model, encoder_out[:1, 8 + skipped[0] :], torch.tensor([8 - skipped[0]]), 2)[0]
    hyp, other = decoder.hypotheses(state)
    assert hyp.tokens == fresh.tokens and hyp.score == pytest.approx(fresh.score, abs=1e-6)
    assert hyp.timestamps == [t + 8 + skipped[0] for t in fresh.timestamps]
    assert (other.tokens, other.timestamps) == _offline(model, encoder_out[1:], full[1:])
    assert fresh.tokens, "the second segment must emit tokens"


def _offline(model, encoder_out, lengths):
    hyp = greedy_search(model, encoder_out, lengths, 2)[0]
    return hyp.tokens, hyp.timestamps


def test_bad_input_is_refused_by_name() -> None:
    model = tiny_transducer()
    decoder = StreamingGreedyDecoder(model)
    state = decoder.initial_state(2)
    frames = torch.randn(2, 3, model.encoder.output_dim)
    with pytest.raises(ValueError, match="encoder_frames has 3 streams, the state 2"):
        decoder.step(torch.randn(3, 3, model.encoder.output_dim), torch.tensor([3, 3, 3]), state)
    with pytest.raises(ValueError, match="frame_lengths must lie in"):
        decoder.step(frames, torch.tensor([4, 3]), state)
    with pytest.raises(ValueError, match="H_e=5, the model's encoder 16"):
        decoder.step(torch.randn(2, 3, 5), torch.tensor([3, 3]), state)
    with pytest.raises(ValueError, match="max_symbols_per_frame=0"):
        StreamingGreedyDecoder(model, 0)
    with pytest.raises(ValueError, match=r"streams must be a \(B,\)=\(2,\) bool tensor"):
        decoder.reset(state, torch.tensor([1, 0]))
