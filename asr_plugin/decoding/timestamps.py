"""Token, word and segment times in seconds from a hypothesis' encoder frames, with NeMo's conventions.

- A token starts at the frame it was emitted at and ends ``durations[i]`` frames later (`Hypothesis.durations`:
  1 for RNN-T, TDT's predicted duration, so a TDT token of duration 0 has no length), as NeMo's token offsets.
  A punctuation token starts and ends where the token before it ends (NeMo's refinement of TDT offsets: a
  punctuation mark is often emitted well after its word, in the following silence).
- A word is a run of tokens that starts with a token whose SentencePiece piece begins with the word marker
  ``▁`` (the tokens before the first such one form a word too); it spans its first token's start to its last
  token's end, and its text is the tokenizer's decoding of its tokens.
- A segment is a run of words that ends with a word ending in one of `SEGMENT_MARKS` (``.?!``), or before a
  word that starts more than ``segment_pause`` seconds after the previous word ends (when a pause is set).

Frame f is at ``offset + f * frame_shift`` seconds, `frame_shift` the encoder's frame shift (the front end's hop
times the subsampling factor: `asr_plugin.decoding.encoder_frame_shift`) and `offset` where the decoded audio
starts in the file (a long file's chunk). Streaming greedy decoding counts frames from the stream's start, so
streamed and offline hypotheses give the same times.
"""

from __future__ import annotations

import unicodedata
from typing import Protocol, Sequence

from asr_plugin.decoding.hypothesis import Hypothesis, Span, Timing
from asr_plugin.decoding.validation import check_seconds

WORD_MARKER = "\u2581"  # SentencePiece's "▁"
SEGMENT_MARKS = ".?!"


class PieceTokenizer(Protocol):
    """What timing needs from a tokenizer: ids -> text, and an id's SentencePiece piece."""

    def decode(self, ids: list[int]) -> str: ...

    def id_to_piece(self, token_id: int) -> str: ...


def is_punctuation(text: str) -> bool:
    """True for a non-empty text of Unicode punctuation only."""
    return bool(text) and all(unicodedata.category(char).startswith("P") for char in text)


def token_frames(hyp: Hypothesis, pieces: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) frame of every token, punctuation refined (module docstring)."""
    if len(hyp.durations) != len(hyp.tokens) or len(hyp.timestamps) != len(hyp.tokens):
        raise ValueError(
            f"the hypothesis has {len(hyp.tokens)} tokens, {len(hyp.timestamps)} timestamps and "
            f"{len(hyp.durations)} durations: time it from a search's own result"
        )
    spans: list[tuple[int, int]] = []
    for start, duration, piece in zip(hyp.timestamps, hyp.durations, pieces):
        if spans and is_punctuation(piece.lstrip(WORD_MARKER)):
            start, duration = spans[-1][1], 0
        spans.append((start, start + duration))
    return spans


def word_groups(pieces: Sequence[str]) -> list[list[int]]:
    """Token indices of each word: a new word at every piece starting with the word marker."""
    words: list[list[int]] = []
    for index, piece in enumerate(pieces):
        if piece.startswith(WORD_MARKER) or not words:
            words.append([])
        words[-1].append(index)
    return words


def segment_groups(words: Sequence[Span], segment_pause: float | None) -> list[list[Span]]:
    """The words of each segment: closed after a word ending in a segment mark, or before a longer pause."""
    segments: list[list[Span]] = []
    current: list[Span] = []
    for word in words:
        if current and segment_pause is not None and word.start - current[-1].end > segment_pause:
            segments.append(current)
            current = []
        current.append(word)
        if word.text and word.text[-1] in SEGMENT_MARKS:
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    return segments


def hypothesis_timing(
    hyp: Hypothesis,
    tokenizer: PieceTokenizer,
    frame_shift: float,
    offset: float = 0.0,
    segment_pause: float | None = None,
) -> Timing:
    """The tokens, words and segments of `hyp` in seconds (module docstring).

    Args:
        tokenizer: the model's (SentencePiece pieces give the word boundaries).
        frame_shift: seconds per encoder frame (> 0).
        offset: seconds where the decoded audio starts in the file (>= 0).
        segment_pause: a pause between words longer than this many seconds also ends a segment; None: only
            ``.?!`` end segments.
    """
    check_seconds("frame_shift", frame_shift, positive=True)
    check_seconds("offset", offset)
    if segment_pause is not None:
        check_seconds("segment_pause", segment_pause)
    pieces = [tokenizer.id_to_piece(token) for token in hyp.tokens]
    frames = token_frames(hyp, pieces)

    def seconds(frame: int) -> float:
        return offset + frame * frame_shift

    tokens = tuple(
        Span(piece.replace(WORD_MARKER, " "), seconds(start), seconds(end))
        for piece, (start, end) in zip(pieces, frames)
    )
    words = tuple(
        Span(
            tokenizer.decode([hyp.tokens[i] for i in group]).strip(),
            seconds(frames[group[0]][0]),
            seconds(max(frames[i][1] for i in group)),
        )
        for group in word_groups(pieces)
    )
    return joined_timing([Timing(tokens, words, ())], segment_pause)


def attach_timing(
    hyps: Sequence[Hypothesis],
    tokenizer: PieceTokenizer,
    frame_shift: float,
    offset: float = 0.0,
    segment_pause: float | None = None,
) -> list[Hypothesis]:
    """Sets ``.timing`` of every hypothesis (`hypothesis_timing` with the same arguments)."""
    for hyp in hyps:
        hyp.timing = hypothesis_timing(hyp, tokenizer, frame_shift, offset, segment_pause)
    return list(hyps)


def joined_timing(timings: Sequence[Timing], segment_pause: float | None = None) -> Timing:
    """The timing of consecutive pieces of one recording (a long file's chunks, a stream's endpoint segments),
    each already timed from the recording's start: tokens and words in order, segments formed anew over all
    words (so that one may run across a cut)."""
    tokens = tuple(span for timing in timings for span in timing.tokens)
    words = tuple(span for timing in timings for span in timing.words)
    segments = tuple(
        Span(" ".join(word.text for word in group), group[0].start, group[-1].end)
        for group in segment_groups(words, segment_pause)
    )
    return Timing(tokens, words, segments)
