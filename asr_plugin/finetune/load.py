"""Partial loading of pretrained weights with include/exclude patterns and a report of what happened."""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

log = logging.getLogger(__name__)


def key_matcher(patterns: Iterable[str] | str | None) -> Callable[[str], bool] | None:
    """Predicate for state-dict keys: shell patterns (``encoder.*``) or regexes prefixed ``re:``.

    Returns None for no patterns. A regex must match at the start of the key (``re.match``).
    """
    if patterns is None:
        return None
    if isinstance(patterns, str):
        patterns = [patterns]
    compiled = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise TypeError(f"key pattern {pattern!r} must be a string")
        if pattern.startswith("re:"):
            try:
                compiled.append(re.compile(pattern[3:]).match)
            except re.error as err:
                raise ValueError(f"key pattern {pattern!r}: bad regular expression ({err})") from None
        else:
            compiled.append(lambda key, p=pattern: fnmatch.fnmatchcase(key, p))
    return lambda key: any(match(key) for match in compiled)


@dataclass
class LoadReport:
    """What `load_pretrained` did, key by key (keys relative to the model).

    Attributes:
        loaded: keys copied from the source.
        missing: selected model keys absent from the source (they keep their initial values).
        unexpected: selected source keys the model does not have.
        mismatched: (key, source shape, model shape) of keys present in both with different shapes (not loaded).
        excluded: model or source keys left out by the include/exclude patterns.
    """

    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True when nothing selected was missing, unexpected or mismatched."""
        return not (self.missing or self.unexpected or self.mismatched)

    def summary(self, limit: int = 20) -> str:
        """Multi-line human-readable report (at most `limit` keys per list)."""

        def listing(title: str, items: list) -> list[str]:
            lines = [f"  {title}: {len(items)}"]
            lines += [f"    {item}" for item in items[:limit]]
            if len(items) > limit:
                lines.append(f"    ... and {len(items) - limit} more")
            return lines

        mismatched = [f"{key}: checkpoint {list(src)} vs model {list(dst)}" for key, src, dst in self.mismatched]
        lines = ["pretrained weights load report:", f"  loaded: {len(self.loaded)} tensors"]
        lines += listing("missing in checkpoint (kept initial values)", self.missing)
        lines += listing("unexpected (in checkpoint, not in model)", self.unexpected)
        lines += listing("shape mismatch (not loaded)", mismatched)
        lines += listing("excluded by include/exclude patterns", self.excluded)
        return "\n".join(lines)


def load_pretrained(
    model: nn.Module,
    source: Mapping[str, torch.Tensor],
    include: Iterable[str] | str | None = None,
    exclude: Iterable[str] | str | None = None,
    strict: bool = False,
) -> LoadReport:
    """Copies matching tensors of `source` into `model` (parameters and buffers) and reports the rest.

    A key takes part when it matches one of `include` (default: every key) and none of `exclude`.
    Tensors whose shapes differ are skipped and reported, never broadcast. The report is logged
    (warning level when anything is missing, unexpected or mismatched). `strict=True` raises
    ValueError instead, before anything is copied.
    """
    wanted, unwanted = key_matcher(include), key_matcher(exclude)

    def selected(key: str) -> bool:
        return (wanted is None or wanted(key)) and not (unwanted is not None and unwanted(key))

    target = model.state_dict()
    report = LoadReport()
    report.excluded = sorted(k for k in set(target) | set(source) if not selected(k))
    report.missing = sorted(k for k in target if selected(k) and k not in source)
    report.unexpected = sorted(k for k in source if selected(k) and k not in target)
    copies: dict[str, torch.Tensor] = {}
    for key in sorted(k for k in source if selected(k) and k in target):
        if tuple(source[key].shape) != tuple(target[key].shape):
            report.mismatched.append((key, tuple(source[key].shape), tuple(target[key].shape)))
        else:
            copies[key] = source[key]
    if strict and not report.clean:
        raise ValueError(f"strict loading failed\n{report.summary()}")
    with torch.no_grad():
        for key, value in copies.items():
            target[key].copy_(value)  # state_dict() tensors share storage with the model
    report.loaded = sorted(copies)
    log.log(logging.INFO if report.clean else logging.WARNING, "%s", report.summary())
    return report
