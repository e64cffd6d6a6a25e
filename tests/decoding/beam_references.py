"""What an unpruned beam search returns, from an enumeration of every token sequence's log-probability: the
reference the exhaustive beam-search tests compare with."""

from __future__ import annotations


def unpruned_choice(totals: dict[tuple[int, ...], float], score_norm: bool) -> tuple[int, ...]:
    """The token sequence of the highest log-probability (`score_norm`: log-probability / (tokens + 1), NeMo's
    ``malsd_batch`` default) among `totals` (token sequence -> log of its summed alignment probability)."""
    return max(totals, key=lambda tokens: totals[tokens] / (len(tokens) + 1) if score_norm else totals[tokens])
