"""Buffered streaming of offline models (`BufferedEncoder` in a `StreamingRecognizer` over feature frames): every encoder frame of every stream is decoded exactly once and in order
(the subsampling's rounding at window edges and the end of the audio included); with contexts covering the
encoder's receptive field the frames and the transcripts are the offline ones; bad settings are refused."""

from __future__ import annotations

import pytest
import torch
from greedy_references import DURATIONS
from tiny_models import tiny_transducer

from asr_plugin.decoding import BufferedEncoder, Hypothesis, StreamingRecognizer, greedy_search
from asr_plugin.decoding.buffered import min_right_context, subsampling_factor
from asr_plugin.frontend.sherpa import normalize_per_feature

FEATURES = 16  # tiny_transducer's input_dim


def peaked(model):
    with torch.no_grad():
        model.joint.output.weight.mul_(1.5)
    return model


def features_batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(len(lengths), max(lengths), FEATURES, generator=generator), torch.tensor(lengths)


def buffered(model, chunk: int, left: int, right: int, max_symbols: int = 4, normalize_window=None):
    """A session of buffered streaming over feature frames."""
    encoder = BufferedEncoder(model, chunk, left, right, normalize_window)
    return StreamingRecognizer(model, encoder, feature_dim=FEATURES, max_symbols_per_frame=max_symbols)


def run_buffered(session: StreamingRecognizer, features, lengths, piece: int):
    """Feeds every stream `piece` frames at a time, then finishes; returns the final state, each stream's final
    hypothesis and, per stream, the encoder frames the decoder was given (in order)."""
    given: list[list[torch.Tensor]] = [[] for _ in range(len(lengths))]
    step = session.decoder.step

    def recording(frames, counts, state):
        for b, count in enumerate(counts.tolist()):
            given[b].append(frames[b, :count].clone())
        return step(frames, counts, state)

    session.decoder.step = recording
    state = session.initial_state(len(lengths))
    for start in range(0, int(lengths.max()), piece):
        counts = (lengths - start).clamp(0, piece)
        state = session.accept(features[:, start : start + piece], counts, state)
    state = session.finish(state)
    segments = session.segments(state)
    assert all(len(s) <= 1 for s in segments)  # no endpointing: a stream is one segment
    hyps = [s[0].hypothesis if s else Hypothesis() for s in segments]
    width = session.decoder.decoder.frame_dim
    return state, hyps, [torch.cat(g) if g else torch.zeros(0, width) for g in given]


# lengths around chunk and subsampling boundaries: shorter than a chunk, not multiples of the factor, one long
LENGTHS = [61, 8, 13, 33, 40, 5]


@pytest.mark.parametrize("subsampling", ["conv2d", "striding"])
@pytest.mark.parametrize(("chunk", "left", "piece"), [(8, 8, 3), (4, 4, 10), (12, 0, 61), (16, 24, 1)])
def test_a_finite_receptive_field_streams_exactly(subsampling: str, chunk: int, left: int, piece: int) -> None:
    """An encoder of subsampling only sees a few frames around each output: with those as context, buffered
    streaming hands the decoder exactly the offline frames, each once, and decodes the offline transcript."""
    model = peaked(tiny_transducer(num_layers=0, subsampling=subsampling, seed=2))
    # conv2d (unpadded): output j sees features 4j ... 4j + 6; striding: 4j - 3 ... 4j + 3
    right = {"conv2d": 3, "striding": 0}[subsampling]
    left = max(left, {"conv2d": 0, "striding": 4}[subsampling])
    features, lengths = features_batch(LENGTHS)
    state, hyps, given = run_buffered(buffered(model, chunk, left, right, 3), features, lengths, piece)
    total = model.encoder.output_lengths(lengths).clamp(min=0)
    keep = lengths >= model.encoder.subsampling.min_input_length()  # the offline encoder refuses shorter ones
    encoded, encoded_lengths = model.encode(features[keep], lengths[keep])
    offline = iter(greedy_search(model, encoded, encoded_lengths, max_symbols_per_frame=3))
    emitted = 0
    for b, hyp in enumerate(hyps):
        assert given[b].shape[0] == int(total[b]) == int(state.decoder.frames_done[b]), b
        if not keep[b]:
            assert hyp.tokens == [] and total[b] == 0
            continue
        row = int(keep[:b].sum())
        torch.testing.assert_close(given[b], encoded[row, : encoded_lengths[row]], atol=1e-5, rtol=1e-5)
        want = next(offline)
        assert (hyp.tokens, hyp.timestamps) == (want.tokens, want.timestamps), b
        assert hyp.score == pytest.approx(want.score, abs=1e-4)
        emitted += len(hyp.tokens)
    assert emitted > 10


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_a_full_context_model_with_whole_utterance_windows_decodes_as_offline(lattice: str) -> None:
    """A Conformer's attention sees its whole window: with left and right contexts longer than the utterances
    every window is the whole utterance, so the frames and the transcripts are the offline ones."""
    record = {"kind": "tdt", "durations": DURATIONS} if lattice == "tdt" else None
    model = peaked(tiny_transducer(num_layers=2, attention="rel_pos", subsampling="striding", lattice=record, seed=4))
    features, lengths = features_batch([57, 23, 40], seed=1)
    _, hyps, given = run_buffered(buffered(model, 8, 64, 64, 2), features, lengths, piece=5)
    encoded, encoded_lengths = model.encode(features, lengths)
    offline = greedy_search(model, encoded, encoded_lengths, max_symbols_per_frame=2)
    for b, (hyp, want) in enumerate(zip(hyps, offline)):
        torch.testing.assert_close(given[b], encoded[b, : encoded_lengths[b]], atol=1e-4, rtol=1e-4)
        assert (hyp.tokens, hyp.timestamps) == (want.tokens, want.timestamps), b
    assert sum(len(h.tokens) for h in offline) > 5


@pytest.mark.parametrize("subsampling", ["conv2d", "dw_striding"])
@pytest.mark.parametrize("factor", [4, 8])
def test_every_frame_is_decoded_once_with_short_contexts(subsampling: str, factor: int) -> None:
    """Short contexts change a full-context model's frames, not which frames are decoded: every stream gets
    exactly its utterance's encoder frames, whatever the pieces' sizes (a piece as long as the stream, or one
    frame at a time give the same frames)."""
    model = tiny_transducer(num_layers=1, subsampling=subsampling, subsampling_factor=factor, seed=1)
    chunk, left = 2 * factor, 2 * factor
    right = min_right_context(model, chunk, left)
    features, lengths = features_batch([70, 3 * factor, 2 * factor + 1, 9, 45], seed=2)
    state, _, given = run_buffered(buffered(model, chunk, left, right), features, lengths, int(lengths.max()))
    total = model.encoder.output_lengths(lengths).clamp(min=0)
    assert [g.shape[0] for g in given] == total.tolist() == state.decoder.frames_done.tolist()
    assert state.encoder.chunks_done.tolist() == (-(-total // (chunk // factor))).tolist()
    _, _, one_by_one = run_buffered(buffered(model, chunk, left, right), features, lengths, piece=1)
    for a, b in zip(given, one_by_one):
        torch.testing.assert_close(a, b)


def test_windows_normalised_per_window() -> None:
    """`normalize_window` runs on each window: with whole-utterance windows that is the offline normalisation."""
    model = peaked(tiny_transducer(num_layers=1, subsampling="striding", seed=6))
    features, lengths = features_batch([50, 31], seed=3)
    features = features * 3 + 1
    _, hyps, _ = run_buffered(buffered(model, 8, 64, 64, normalize_window=normalize_per_feature), features, lengths, 7)
    offline = greedy_search(model, *model.encode(normalize_per_feature(features, lengths), lengths), 4)
    unnormalised = greedy_search(model, *model.encode(features, lengths), 4)  # the session's cap
    got = [h.tokens for h in hyps]
    assert got == [h.tokens for h in offline] != [h.tokens for h in unnormalised]


def test_bad_settings_and_input_are_refused_by_name() -> None:
    model = tiny_transducer(num_layers=0, subsampling="conv2d")
    assert subsampling_factor(model) == 4 and min_right_context(model, 8, 8) == 3
    with pytest.raises(
        ValueError, match="chunk_frames=2 must be a positive multiple of the encoder's subsampling factor 4"
    ):
        BufferedEncoder(model, 2, 8, 8)
    with pytest.raises(ValueError, match="chunk_frames=10 must be a positive multiple"):
        BufferedEncoder(model, 10, 8, 8)
    with pytest.raises(ValueError, match="left_frames=6 must be a multiple of the subsampling factor 4"):
        BufferedEncoder(model, 8, 6, 8)
    with pytest.raises(ValueError, match="right_frames=2 is shorter than the subsampling needs.*right_frames >= 3"):
        BufferedEncoder(model, 8, 8, 2)
    with pytest.raises(ValueError, match="right_frames=-1 must be an int >= 0"):
        BufferedEncoder(model, 8, 8, -1)
    session = buffered(model, 8, 8, 3)
    state = session.initial_state(2)
    with pytest.raises(ValueError, match="features has 3 streams, the state 2"):
        session.accept(torch.zeros(3, 4, FEATURES), torch.tensor([4, 4, 4]), state)
    with pytest.raises(ValueError, match="features have F=5 bins, the state 16"):
        session.accept(torch.zeros(2, 4, 5), torch.tensor([4, 4]), state)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 4\]"):
        session.accept(torch.zeros(2, 4, FEATURES), torch.tensor([5, 4]), state)
    state = session.finish(session.accept(torch.zeros(2, 4, FEATURES), torch.tensor([4, 4]), state))
    with pytest.raises(ValueError, match="stream 0 has ended"):
        session.accept(torch.zeros(2, 4, FEATURES), torch.tensor([4, 4]), state)
