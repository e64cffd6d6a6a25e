"""A typographic apostrophe ("don’t") is the tokenizer's ASCII apostrophe, not a word break."""

from __future__ import annotations

import pytest

from asr_plugin.text.normalize import TextNormalizer

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@pytest.mark.parametrize("apostrophe", ["\u2019", "\u2018", "\u02bc"])
def test_typographic_apostrophes_become_the_ascii_one(apostrophe):
    text, counts = TextNormalizer("upper", LETTERS + "'").normalize_counted(f"don{apostrophe}t o{apostrophe}clock")
    assert text == "DON'T O'CLOCK" and counts.mapped == 2 and counts.dropped == 0


def test_without_an_apostrophe_in_the_alphabet_it_is_dropped_as_before():
    text, counts = TextNormalizer("upper", LETTERS).normalize_counted("don\u2019t")
    assert text == "DON T" and counts.dropped == 1
