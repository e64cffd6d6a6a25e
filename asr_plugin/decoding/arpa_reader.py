"""Reading an ARPA back-off n-gram file (any order) into its n-grams, with errors that name the file and line.

Our own parser, not a library's: kenlm's Python module (installed) reads ARPA but only answers queries, it cannot
list the n-grams and back-off weights that `asr_plugin.decoding.ngram_lm` turns into tensors; NeMo's reader
(``NGramGPULanguageModel.from_arpa``) is part of NeMo, which the package does not depend on, and it asserts
instead of naming a bad line. The format (as kenlm's ``lmplz`` and IRSTLM's ``compile-lm --text=yes`` write it):

    \\data\\
    ngram 1=<count>
    ...
    \\1-grams:
    <log10 prob> <w> [<log10 back-off>]
    ...
    \\end\\

Fields are separated by spaces or tabs only (``str.split()`` would also split NeMo's ``chr(token_id + 100)``
words such as U+0085 and U+00A0, which Python counts as white space).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_BYTES = 2 * 1024**3  # an LM this reader keeps in Python lists before the tensors: a few GiB of RAM
_FIELDS = re.compile(r"[ \t]+")
_COUNT = re.compile(r"ngram[ \t]+(\d+)[ \t]*=[ \t]*(\d+)")
_SECTION = re.compile(r"\\(\d+)-grams:")


@dataclass(frozen=True)
class ArpaNgrams:
    """The n-grams of one ARPA file, by order (index k - 1 holds the k-grams, in file order).

    Attributes:
        path: the file read.
        words: per order, each n-gram's words.
        log10_probs: per order, each n-gram's log10 probability.
        log10_backoffs: per order, each n-gram's log10 back-off weight (0 where the line has none).
        lines: per order, each n-gram's line number in the file (1-based), for error messages.
    """

    path: str
    words: list[list[tuple[str, ...]]]
    log10_probs: list[list[float]]
    log10_backoffs: list[list[float]]
    lines: list[list[int]]

    @property
    def order(self) -> int:
        return len(self.words)


def read_arpa(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES) -> ArpaNgrams:
    """Reads an ARPA file; refuses (ValueError naming the file and line) a file over `max_bytes` before reading
    it, a malformed header, section or n-gram line, a NaN or +inf weight, and a section whose n-gram count differs
    from the ``\\data\\`` header's."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"ARPA file {path}: {size} bytes, over the limit max_bytes={max_bytes}")
    with open(path, encoding="utf-8") as lines:
        return _Parser(str(path)).parse(lines)


class _Parser:
    """One pass over the lines: the header's counts, then each section's n-grams."""

    def __init__(self, path: str):
        self.path = path
        self.counts: list[int] = []
        self.result = ArpaNgrams(path, [], [], [], [])

    def error(self, line_no: int, message: str) -> ValueError:
        return ValueError(f"ARPA file {self.path}, line {line_no}: {message}")

    def parse(self, lines) -> ArpaNgrams:
        try:
            numbered = enumerate(lines, start=1)
            self._header(numbered)
            self._sections(numbered)
        except UnicodeDecodeError as error:
            raise ValueError(f"ARPA file {self.path}: not UTF-8 text ({error})") from None
        return self.result

    def _header(self, numbered) -> None:
        seen_data = False
        for line_no, raw in numbered:
            line = raw.strip(" \t\r\n")
            if not line:
                continue
            if not seen_data:
                if line != "\\data\\":
                    raise self.error(line_no, f"expected \\data\\, found {line[:40]!r}")
                seen_data = True
                continue
            count = _COUNT.fullmatch(line)
            if count:
                order, number = int(count.group(1)), int(count.group(2))
                if order != len(self.counts) + 1:
                    raise self.error(line_no, f"'ngram {order}=' where 'ngram {len(self.counts) + 1}=' was due")
                self.counts.append(number)
                continue
            if _SECTION.fullmatch(line) and self.counts:
                self._open_section(line_no, line)
                return
            raise self.error(line_no, f"not an 'ngram <order>=<count>' header line: {line[:40]!r}")
        raise ValueError(f"ARPA file {self.path}: no \\data\\ header followed by an n-gram section")

    def _open_section(self, line_no: int, line: str) -> None:
        order = int(_SECTION.fullmatch(line).group(1))
        due = self.result.order + 1
        if order != due or order > len(self.counts):
            raise self.error(
                line_no,
                f"section {line!r} where \\{due}-grams: was due (the header lists orders 1 to {len(self.counts)})",
            )
        for field in (self.result.words, self.result.log10_probs, self.result.log10_backoffs, self.result.lines):
            field.append([])

    def _close_section(self, line_no: int) -> None:
        order = self.result.order
        found, declared = len(self.result.words[-1]), self.counts[order - 1]
        if found != declared:
            raise self.error(
                line_no, f"section \\{order}-grams: has {found} n-grams, the \\data\\ header says {declared}"
            )

    def _sections(self, numbered) -> None:
        for line_no, raw in numbered:
            line = raw.strip(" \t\r\n")
            if not line:
                continue
            if line == "\\end\\":
                self._close_section(line_no)
                if self.result.order != len(self.counts):
                    raise self.error(line_no, f"\\end\\ after order {self.result.order} of {len(self.counts)}")
                return
            if _SECTION.fullmatch(line):
                self._close_section(line_no)
                self._open_section(line_no, line)
                continue
            self._ngram(line_no, line)
        raise ValueError(f"ARPA file {self.path}: ends without \\end\\")

    def _ngram(self, line_no: int, line: str) -> None:
        order = self.result.order
        fields = _FIELDS.split(line)
        if len(fields) not in (order + 1, order + 2):
            raise self.error(
                line_no, f"a {order}-gram line has {len(fields)} fields, not {order + 1} or {order + 2}: {line[:60]!r}"
            )
        prob = self._weight(line_no, fields[0])
        backoff = self._weight(line_no, fields[-1]) if len(fields) == order + 2 else 0.0
        self.result.words[-1].append(tuple(fields[1 : order + 1]))
        self.result.log10_probs[-1].append(prob)
        self.result.log10_backoffs[-1].append(backoff)
        self.result.lines[-1].append(line_no)

    def _weight(self, line_no: int, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise self.error(line_no, f"weight {text[:20]!r} is not a number") from None
        if math.isnan(value) or value == math.inf:
            raise self.error(line_no, f"weight {text!r} is not a log10 probability or back-off")
        return value
