"""The decoding result type shared by greedy and beam search."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


class TokenDecoder(Protocol):
    """What decoding needs from a tokenizer: token ids (never blank) -> text."""

    def decode(self, ids: list[int]) -> str: ...


@dataclass
class Hypothesis:
    """One recognised token sequence.

    Attributes:
        tokens: emitted token ids in order, blanks removed.
        score: natural-log probability of the hypothesis under the search's topology (see the
            search functions for which blank terms are included).
        timestamps: encoder frame index at which each token was emitted (len(timestamps) == len(tokens)).
        text: detokenised transcript, set when the search was given a tokenizer.
    """

    tokens: list[int] = field(default_factory=list)
    score: float = 0.0
    timestamps: list[int] = field(default_factory=list)
    text: str | None = None


def attach_text(hyps: Sequence[Hypothesis], tokenizer: TokenDecoder | None) -> list[Hypothesis]:
    """Fills `.text` of every hypothesis from `tokenizer.decode(tokens)`; no-op without a tokenizer."""
    if tokenizer is not None:
        for hyp in hyps:
            hyp.text = tokenizer.decode(list(hyp.tokens))
    return list(hyps)
