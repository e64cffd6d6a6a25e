"""The counts behind scripts/benchmark_hotwords.py's table: missed words and recall per utterance, random
phrases."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.hotwords import missed_words, random_phrases, recall


def test_missed_words_and_recall_count_per_utterance() -> None:
    refs = ["THE CAT THE HAT", "A CAT", "NO CAT HERE"]
    hyps = ["THE CAT HAT", "A BAT CAT CAT", "NO HERE"]
    assert missed_words(refs, hyps) == Counter({"THE": 1, "CAT": 1})
    # CAT: 3 in the references; found once, once (extra copies do not count) and not at all
    assert recall({"CAT"}, refs, hyps) == (3, pytest.approx(2 / 3))
    assert recall({"THE", "HAT"}, refs, hyps) == (3, pytest.approx(2 / 3))
    assert recall({"DOG"}, refs, hyps) == (0, 0.0)


def test_random_phrases_are_distinct_word_sequences() -> None:
    phrases = random_phrases(["A", "B", "C"], 30)
    assert len(phrases) == len(set(phrases)) == 30 and all(1 <= len(p.split()) <= 3 for p in phrases)
    assert len(random_phrases(["A"], 10)) == 3  # A, A A, A A A: all there are
