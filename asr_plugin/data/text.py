"""LibriSpeech-style text normalisation shared by the reader, the tokenizer and the mini corpus."""

from __future__ import annotations

import re

# LibriSpeech transcripts use upper-case letters, apostrophes and single spaces only.
_NOT_KEPT = re.compile(r"[^A-Z0-9' ]+")
_SPACES = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Upper-cases `text`, turns every character other than A-Z, 0-9 and "'" into a space
    and collapses runs of whitespace, e.g. "the  red, cat." -> "THE RED CAT"."""
    upper = _NOT_KEPT.sub(" ", text.upper())
    return _SPACES.sub(" ", upper).strip()
