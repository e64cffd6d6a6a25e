"""Timestamps in seconds: tokens from frames and durations (RNN-T 1 frame, TDT its duration), words at the
SentencePiece word marker, punctuation moved to the end of the token before it, segments at .?! or a pause;
greedy and beam record the durations the searches took; SRT and WebVTT files in their strict formats."""

from __future__ import annotations

import re

import pytest
from greedy_references import tdt_model
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import Hypothesis, beam_search, greedy_search
from asr_plugin.decoding.hypothesis import Span
from asr_plugin.decoding.timestamps import attach_timing, hypothesis_timing, joined_timing
from asr_plugin.evaluation.subtitles import srt_text, webvtt_text

PIECES = ["<blk>", "▁the", "▁c", "at", ".", "▁a", "▁dog", "!", "s"]


class PieceTokenizer:
    """Token id -> PIECES[id]; decoding joins the pieces, the word marker a space."""

    def id_to_piece(self, token_id: int) -> str:
        return PIECES[token_id]

    def decode(self, ids: list[int]) -> str:
        return "".join(PIECES[i] for i in ids).replace("▁", " ").strip()


def expected_spans(hyp: Hypothesis, groups: list[list[int]], shift: float, offset: float) -> list[Span]:
    """The convention written out: token i covers [f_i, f_i + d_i] frames, a punctuation token [e_{i-1}, e_{i-1}];
    a group spans its first token's start to its last one's end."""
    starts, ends = [], []
    for i, (frame, duration) in enumerate(zip(hyp.timestamps, hyp.durations)):
        if PIECES[hyp.tokens[i]] in (".", "!") and i > 0:
            frame, duration = ends[-1], 0
        starts.append(frame)
        ends.append(frame + duration)
    return [
        Span(
            PieceTokenizer().decode([hyp.tokens[i] for i in group]),
            offset + starts[group[0]] * shift,
            offset + ends[group[-1]] * shift,
        )
        for group in groups
    ]


def test_words_and_segments_follow_the_word_marker_punctuation_and_pauses() -> None:
    # "the cat. a dogs!" with the "." predicted late (frame 9) and a long pause before "a"
    hyp = Hypothesis(
        tokens=[1, 2, 3, 4, 5, 6, 8, 7], timestamps=[0, 2, 3, 9, 30, 31, 33, 40], durations=[2, 1, 2, 3, 1, 2, 0, 1]
    )
    timing = hypothesis_timing(hyp, PieceTokenizer(), frame_shift=0.08, offset=1.5)
    word_groups = [[0], [1, 2, 3], [4], [5, 6, 7]]
    assert list(timing.words) == pytest.approx(expected_spans(hyp, word_groups, 0.08, 1.5))
    assert [w.text for w in timing.words] == ["the", "cat.", "a", "dogs!"]
    assert timing.tokens[3].start == timing.tokens[3].end == timing.tokens[2].end  # the late "." refined
    assert [s.text for s in timing.segments] == ["the cat.", "a dogs!"]
    assert timing.segments[0].end == timing.words[1].end and timing.segments[1].start == timing.words[2].start
    # without "." and "!", a pause longer than the setting ends a segment; one no longer than it does not
    plain = Hypothesis(tokens=[1, 2, 5, 6], timestamps=[0, 2, 30, 31], durations=[1, 1, 1, 1])
    gap = (30 - 3) * 0.08
    assert [s.text for s in hypothesis_timing(plain, PieceTokenizer(), 0.08, segment_pause=gap - 0.01).segments] == [
        "the c",
        "a dog",
    ]
    assert len(hypothesis_timing(plain, PieceTokenizer(), 0.08, segment_pause=gap + 0.01).segments) == 1
    assert len(hypothesis_timing(plain, PieceTokenizer(), 0.08).segments) == 1
    # a long file's chunks: times from the file's start, segments formed over all words
    halves = [
        hypothesis_timing(Hypothesis(tokens=[t], timestamps=[0], durations=[1]), PieceTokenizer(), 0.08, o)
        for t, o in ((1, 0.0), (6, 2.0))
    ]
    joined = joined_timing(halves, segment_pause=1.0)
    assert [w.start for w in joined.words] == [0.0, 2.0] and [s.text for s in joined.segments] == ["the", "dog"]
    with pytest.raises(ValueError, match="durations"):
        hypothesis_timing(Hypothesis(tokens=[1], timestamps=[0]), PieceTokenizer(), 0.08)
    with pytest.raises(ValueError, match="frame_shift"):
        hypothesis_timing(hyp, PieceTokenizer(), 0.0)


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_searches_record_the_frames_each_token_covers(lattice: str) -> None:
    model = tdt_model(1) if lattice == "tdt" else tiny_transducer(seed=1)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=12, seed=1)
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=2)
    beam_one = beam_search(model, encoder_out, lengths, beam=1, max_symbols_per_frame=2)
    beam = beam_search(model, encoder_out, lengths, beam=4, max_symbols_per_frame=2)
    for hyp in greedy + beam:
        assert len(hyp.durations) == len(hyp.tokens)
        if lattice == "rnnt":
            assert set(hyp.durations) <= {1}
        else:  # the next token comes at or after the frames this one covers
            assert all(a + d <= b for a, d, b in zip(hyp.timestamps, hyp.durations, hyp.timestamps[1:]))
    assert [h.durations for h in beam_one] == [h.durations for h in greedy]
    if lattice == "tdt":
        covers = {d for h in greedy for d in h.durations}
        assert 0 in covers and len(covers) > 2, covers
    timed = attach_timing(greedy, PieceTokenizer(), 0.04)
    assert all(len(h.timing.tokens) == len(h.tokens) for h in timed)


SRT_CUE = r"(\d+)\n(\d\d:[0-5]\d:[0-5]\d,\d{3}) --> (\d\d:[0-5]\d:[0-5]\d,\d{3})\n([^\n]+)\n\n"
VTT_CUE = r"(\d\d:[0-5]\d:[0-5]\d\.\d{3}) --> (\d\d:[0-5]\d:[0-5]\d\.\d{3})\n([^\n]+)\n\n"


def seconds(stamp: str) -> float:
    hours, minutes, rest = stamp.replace(",", ".").split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(rest)


def test_srt_and_webvtt_files_are_strictly_formatted() -> None:
    segments = [
        Span("the cat.", 0.0, 1.2345),
        Span("", 2.0, 2.5),
        Span("a  dog!", 3599.9996, 3725.5),
        Span("x", 5.0, 4.0),
    ]
    srt = srt_text(segments)
    cues = re.findall(SRT_CUE, srt)
    assert "".join(f"{n}\n{a} --> {b}\n{t}\n\n" for n, a, b, t in cues) == srt  # nothing but cues
    assert [int(n) for n, *_ in cues] == [1, 2, 3]
    assert [t for *_, t in cues] == ["the cat.", "a dog!", "x"]  # empty segments make no cue, spaces collapsed
    spans = [s for s in segments if s.text]
    for (_, start, end, _), span in zip(cues, spans):
        assert seconds(start) == pytest.approx(span.start, abs=5e-4)
        assert seconds(end) == pytest.approx(max(span.end, span.start), abs=5e-4)
        assert seconds(end) >= seconds(start)
    assert cues[1][1] == "01:00:00,000" and cues[1][2] == "01:02:05,500"
    vtt = webvtt_text(segments)
    assert vtt.startswith("WEBVTT\n\n")
    vtt_cues = re.findall(VTT_CUE, vtt)
    assert "WEBVTT\n\n" + "".join(f"{a} --> {b}\n{t}\n\n" for a, b, t in vtt_cues) == vtt
    assert [(a.replace(".", ","), b.replace(".", ","), t) for a, b, t in vtt_cues] == [c[1:] for c in cues]
