"""Fields of the one-line-per-item text the tools print and write (a skip list's ``where<TAB>why``, transcribe.py's
``path<TAB>text``): a file name may hold a tab or a newline, which would split one item over two fields or lines."""

from __future__ import annotations

import json
import unicodedata


def line_field(text: str) -> str:
    """`text` as it is, or, when it holds a control character (tab, newline, ...) or starts with a double quote,
    as a JSON string (quoted, ``\\t`` and ``\\n`` escaped), which ``json.loads`` reads back."""
    if text.startswith('"') or any(unicodedata.category(c) == "Cc" for c in text):
        return json.dumps(text, ensure_ascii=False)
    return text
