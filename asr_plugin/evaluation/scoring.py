"""Per-utterance recognition and error files and corpus WER (icefall-style ``recogs-*``/``errs-*``)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jiwer

from asr_plugin.files import write_text_atomic


@dataclass(frozen=True)
class Recognition:
    """One decoded utterance: id, reference and hypothesis text (normalised words)."""

    id: str
    ref: str
    hyp: str


@dataclass
class ErrorCounts:
    """Word-level edit counts of a set (or one utterance)."""

    ref_words: int = 0
    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        """Errors / reference words, in percent."""
        return 100.0 * self.errors / self.ref_words if self.ref_words else 0.0

    def add(self, other: "ErrorCounts") -> None:
        """Accumulates `other` into these counts."""
        self.ref_words += other.ref_words
        self.substitutions += other.substitutions
        self.deletions += other.deletions
        self.insertions += other.insertions


def _aligned(recognition: Recognition) -> tuple[ErrorCounts, str, list[tuple[str, str]]]:
    """Counts, the alignment as text ("THE (CAT->HAT) (*->A) SEES") and the (ref, hyp) error pairs ("*" = none)."""
    ref_words, hyp_words = recognition.ref.split(), recognition.hyp.split()
    if not ref_words:
        raise ValueError(f"utterance {recognition.id}: empty reference text")
    counts = ErrorCounts(ref_words=len(ref_words))
    if not hyp_words:
        counts.deletions = len(ref_words)
        return counts, " ".join(f"({w}->*)" for w in ref_words), [(w, "*") for w in ref_words]
    output = jiwer.process_words(recognition.ref, recognition.hyp)
    counts.substitutions, counts.deletions, counts.insertions = (
        output.substitutions,
        output.deletions,
        output.insertions,
    )
    parts, pairs = [], []
    for chunk in output.alignments[0]:
        refs = ref_words[chunk.ref_start_idx : chunk.ref_end_idx]
        hyps = hyp_words[chunk.hyp_start_idx : chunk.hyp_end_idx]
        if chunk.type == "equal":
            parts += refs
            continue
        if chunk.type == "delete":
            hyps = ["*"] * len(refs)
        elif chunk.type == "insert":
            refs = ["*"] * len(hyps)
        pairs += list(zip(refs, hyps))
        parts += [f"({r}->{h})" for r, h in zip(refs, hyps)]
    return counts, " ".join(parts), pairs


def score(recognitions: Sequence[Recognition]) -> ErrorCounts:
    """Corpus-level counts (sum over utterances)."""
    total = ErrorCounts()
    for recognition in recognitions:
        total.add(_aligned(recognition)[0])
    return total


def write_recogs(recognitions: Sequence[Recognition], path: str | os.PathLike) -> Path:
    """TSV with header ``id ref hyp``, one utterance per line, sorted by id."""
    path = Path(path)
    lines = ["id\tref\thyp"] + [f"{r.id}\t{r.ref}\t{r.hyp}" for r in sorted(recognitions, key=lambda r: r.id)]
    return write_text_atomic(path, "\n".join(lines) + "\n")


def write_errs(recognitions: Sequence[Recognition], path: str | os.PathLike, top: int = 20) -> Path:
    """Error details: totals, per-utterance counts and alignment, then the most frequent errors."""
    path = Path(path)
    total, lines, pairs = ErrorCounts(), [], Counter()
    for r in sorted(recognitions, key=lambda r: r.id):
        counts, alignment, errors = _aligned(r)
        total.add(counts)
        pairs.update(errors)
        lines.append(
            f"{r.id}\t{counts.substitutions}\t{counts.deletions}\t{counts.insertions}\t{counts.ref_words}\t{alignment}"
        )
    kinds = {
        "SUBSTITUTIONS": [(p, n) for p, n in pairs.most_common() if "*" not in p],
        "DELETIONS": [(p, n) for p, n in pairs.most_common() if p[1] == "*"],
        "INSERTIONS": [(p, n) for p, n in pairs.most_common() if p[0] == "*"],
    }
    out = [
        f"%WER {total.wer:.2f} [ {total.errors} / {total.ref_words}, {total.insertions} ins, "
        f"{total.deletions} del, {total.substitutions} sub ]",
        "",
        "PER-UTT DETAILS: id, S, D, I, ref words, alignment with (ref->hyp) for errors",
        *lines,
    ]
    for title, items in kinds.items():
        out += ["", f"{title} (count ref -> hyp), top {top}:"]
        out += [f"{n}\t{ref} -> {hyp}" for (ref, hyp), n in items[:top]]
    return write_text_atomic(path, "\n".join(out) + "\n")
