"""Text normalisation: what a tokenizer expects its text to look like, and a count of what it had to change.

A `TextNormalizer` is a case (upper, lower or as given) and the set of characters a tokenizer can spell.
Normalising a transcript applies the case, maps every other character that is an accented (or stroked,
or ligature) form of kept letters to those letters ("CAFÉ" -> "CAFE", "Æ" -> "AE", "Ø" -> "O"), turns the
remaining ones into spaces and collapses whitespace. The mapped and the dropped characters are counted
(`NormalizationCounts`), so a corpus whose text does not fit its tokenizer is reported instead of being
silently mangled. Changing the case is the tokenizer's convention and is not counted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CASES = ("upper", "lower", None)
# Latin letters that Unicode does not decompose into a base letter and a mark (lower case; upper case
# forms are looked up after lower-casing), and the typographic apostrophes (right single quotation mark, left
# single quotation mark, modifier letter apostrophe) that word processors put in "don’t": the ASCII one
_UNDECOMPOSED = {
    "ß": "ss",
    "æ": "ae",
    "œ": "oe",
    "ø": "o",
    "ł": "l",
    "đ": "d",
    "ð": "d",
    "þ": "th",
    "ı": "i",
    "\u2019": "'",
    "\u2018": "'",
    "\u02bc": "'",
}


@dataclass(frozen=True)
class NormalizationCounts:
    """What normalisation changed in some transcripts.

    Attributes:
        mapped: characters replaced by the base letter(s) they are an accented form of.
        dropped: characters the tokenizer cannot spell, replaced by a space.
        texts: transcripts with at least one mapped or dropped character.
        total: transcripts normalised.
    """

    mapped: int = 0
    dropped: int = 0
    texts: int = 0
    total: int = 0

    @property
    def changed(self) -> int:
        """Characters mapped or dropped."""
        return self.mapped + self.dropped

    def __add__(self, other: "NormalizationCounts") -> "NormalizationCounts":
        return NormalizationCounts(
            self.mapped + other.mapped, self.dropped + other.dropped, self.texts + other.texts, self.total + other.total
        )

    def describe(self) -> str:
        """E.g. "3 of 2000 transcripts changed: 4 accented characters mapped to base letters, 1 dropped"."""
        return (
            f"{self.texts} of {self.total} transcripts changed: {self.mapped} accented character(s) mapped "
            f"to base letters, {self.dropped} character(s) outside the tokenizer's alphabet dropped"
        )


@dataclass(frozen=True)
class TextNormalizer:
    """Case and alphabet of a tokenizer.

    Args:
        case: "upper", "lower", or None (the text's own case is kept).
        characters: every character kept after the case is applied (whitespace always separates words).
    """

    case: str | None
    characters: str

    def __post_init__(self) -> None:
        if self.case not in CASES:
            raise ValueError(f"case must be one of {CASES}, got {self.case!r}")
        if not isinstance(self.characters, str) or not self.characters.strip():
            raise ValueError(f"characters must be a non-empty string of the kept characters, got {self.characters!r}")
        kept = "".join(sorted(set(self.characters) - set(" \t\n\r\f\v")))
        object.__setattr__(self, "characters", kept)
        object.__setattr__(self, "_outside", re.compile(f"[^{re.escape(kept)}\\s]"))

    @classmethod
    def from_vocabulary(cls, pieces: Iterable[str]) -> "TextNormalizer":
        """The normaliser of a SentencePiece vocabulary (its ordinary pieces, "▁" marking word starts): the
        characters it spells, lower case when it has lower-case letters only (NeMo's English tokenizers),
        upper case when it has upper-case letters only, else the text's own case."""
        characters = {c for piece in pieces for c in piece if c != "▁"}
        lower = any(c.islower() for c in characters)
        upper = any(c.isupper() for c in characters)
        case = "lower" if lower and not upper else "upper" if upper and not lower else None
        return cls(case, "".join(characters))

    def record(self) -> dict[str, Any]:
        """{"case", "characters"}: plain data for a checkpoint."""
        return {"case": self.case, "characters": self.characters}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "TextNormalizer":
        """Rebuilds the normaliser of `record()`; ValueError names a malformed record."""
        if not isinstance(record, Mapping) or set(record) != {"case", "characters"}:
            raise ValueError(f"text normalisation record must have exactly the keys case, characters; got {record!r}")
        return cls(record["case"], record["characters"])

    def _cased(self, text: str) -> str:
        return text.upper() if self.case == "upper" else text.lower() if self.case == "lower" else text

    def _base_letters(self, char: str) -> str | None:
        """The kept letters `char` is an accented form of, or None."""
        decomposed = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        if decomposed == char:
            lower = char.lower()
            decomposed = _UNDECOMPOSED.get(lower, char)
            if lower != char:
                decomposed = decomposed.upper()
        base = self._cased(decomposed)
        return base if base and base != char and not self._outside.search(base) else None

    def _normalize(self, text: str) -> tuple[str, int, int]:
        """(normalised text, characters mapped, characters dropped)."""
        cased = self._cased(text)
        mapped = dropped = 0
        if self._outside.search(cased):  # the slow path only for text with characters outside the alphabet
            pieces = []
            for char in cased:
                if not self._outside.match(char):
                    pieces.append(char)
                elif (base := self._base_letters(char)) is not None:
                    pieces.append(base)
                    mapped += 1
                else:
                    pieces.append(" ")
                    dropped += 1
            cased = "".join(pieces)
        return " ".join(cased.split()), mapped, dropped

    def normalize_counted(self, text: str) -> tuple[str, NormalizationCounts]:
        """(normalised text, what was changed), e.g. for the LibriSpeech normaliser
        "Café naïve, Søren!" -> ("CAFE NAIVE SOREN", mapped=3, dropped=2)."""
        clean, mapped, dropped = self._normalize(text)
        return clean, NormalizationCounts(mapped, dropped, int(mapped + dropped > 0), 1)

    def normalize_all(self, texts: Iterable[str]) -> tuple[list[str], NormalizationCounts]:
        """Normalised `texts` and the total of what was changed in them (to report per manifest)."""
        normalized, mapped, dropped, changed = [], 0, 0, 0
        for text in texts:
            clean, text_mapped, text_dropped = self._normalize(text)
            normalized.append(clean)
            mapped, dropped = mapped + text_mapped, dropped + text_dropped
            changed += text_mapped + text_dropped > 0
        return normalized, NormalizationCounts(mapped, dropped, changed, len(normalized))

    def __call__(self, text: str) -> str:
        """The normalised text (see `normalize_counted`)."""
        return self.normalize_counted(text)[0]


# LibriSpeech's own convention, and that of the tokenizers this project trains: upper case, A-Z, 0-9 and "'".
LIBRISPEECH_NORMALIZER = TextNormalizer("upper", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'")
