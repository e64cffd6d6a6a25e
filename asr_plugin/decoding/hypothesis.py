"""The decoding result types shared by greedy and beam search: a hypothesis and its times in seconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


class TokenDecoder(Protocol):
    """What decoding needs from a tokenizer: token ids (never blank) -> text."""

    def decode(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class Span:
    """A stretch of text and its time in seconds, [start, end]."""

    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Timing:
    """A hypothesis' tokens, words and segments in time (`attach_timing`)."""

    tokens: tuple[Span, ...]
    words: tuple[Span, ...]
    segments: tuple[Span, ...]

    def record(self) -> dict[str, list[dict[str, float | str]]]:
        """As plain JSON-ready lists: {"tokens"|"words"|"segments": [{"text", "start", "end"}]}."""
        return {
            kind: [{"text": span.text, "start": round(span.start, 3), "end": round(span.end, 3)} for span in spans]
            for kind, spans in (("tokens", self.tokens), ("words", self.words), ("segments", self.segments))
        }


@dataclass
class Hypothesis:
    """One recognised token sequence.

    Attributes:
        tokens: emitted token ids in order, blanks removed.
        score: natural-log probability of the hypothesis under the search's topology (see the
            search functions for which blank terms are included).
        timestamps: encoder frame index at which each token was emitted (len(timestamps) == len(tokens)).
        durations: encoder frames each token covers, from its frame on: 1 for RNN-T, TDT's predicted duration
            (0 included); a token ends at frame ``timestamps[i] + durations[i]`` (NeMo's token end offset).
        text: detokenised transcript, set when the search was given a tokenizer.
        timing: token, word and segment times in seconds (`asr_plugin.decoding.timestamps.attach_timing`).
        token_confidence: each token's confidence in [0, 1] when the search was given a confidence method
            (`asr_plugin.decoding.confidence`); empty otherwise.
        word_confidence: each word's, aggregated from its tokens' (`asr_plugin.decoding.attach_word_confidence`).
    """

    tokens: list[int] = field(default_factory=list)
    score: float = 0.0
    timestamps: list[int] = field(default_factory=list)
    durations: list[int] = field(default_factory=list)
    text: str | None = None
    timing: Timing | None = None
    token_confidence: list[float] = field(default_factory=list)
    word_confidence: list[float] = field(default_factory=list)


def attach_text(hyps: Sequence[Hypothesis], tokenizer: TokenDecoder | None) -> list[Hypothesis]:
    """Fills `.text` of every hypothesis from `tokenizer.decode(tokens)`; no-op without a tokenizer."""
    if tokenizer is not None:
        for hyp in hyps:
            hyp.text = tokenizer.decode(list(hyp.tokens))
    return list(hyps)
