"""The shallow fusion a decoding is asked for (eval.py's ``decoding.hotwords``/``decoding.hotwords_score``,
transcribe.py's ``--hotwords``/``--hotwords-score``), as plain settings that become scorers once the model's
tokenizer is known (`asr_plugin.decoding.fusion`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asr_plugin.decoding.fusion import WeightedScorer
from asr_plugin.decoding.phrase_boosting import PhraseBoosting, PhraseTokenizer, check_score

DEFAULT_HOTWORDS_SCORE = 1.5  # sherpa-onnx's default hotwords_score


@dataclass(frozen=True)
class FusionSpec:
    """What to fuse into the searches.

    Attributes:
        hotwords: a sherpa-onnx hotwords file (one phrase per line, optional `` :score``), or None.
        hotwords_score: the per-token score of a phrase without its own (finite, > 0).
    """

    hotwords: str | os.PathLike | None = None
    hotwords_score: float = DEFAULT_HOTWORDS_SCORE

    def __post_init__(self) -> None:
        check_score("hotwords_score", self.hotwords_score)
        if self.hotwords is not None and not Path(self.hotwords).is_file():
            raise FileNotFoundError(f"hotwords file {self.hotwords}: no such file")

    @classmethod
    def from_config(cls, decoding: Mapping[str, Any]) -> "FusionSpec":
        """The spec of eval.py's ``decoding`` config (``hotwords``, ``hotwords_score``; absent: none, 1.5)."""
        score = decoding.get("hotwords_score")
        return cls(decoding.get("hotwords"), DEFAULT_HOTWORDS_SCORE if score is None else float(score))

    def scorers(self, tokenizer: PhraseTokenizer) -> list[WeightedScorer]:
        """The weighted scorers for a model of `tokenizer` (phrases spelt with it; errors name file and line)."""
        if self.hotwords is None:
            return []
        return [WeightedScorer(PhraseBoosting.from_file(self.hotwords, tokenizer, self.hotwords_score), 1.0)]

    def record(self) -> dict[str, Any]:
        """What a results summary records of it (nothing without fusion)."""
        if self.hotwords is None:
            return {}
        return {"hotwords": str(self.hotwords), "hotwords_score": self.hotwords_score}


NO_FUSION = FusionSpec()  # the joint alone
