"""The shallow fusion a decoding is asked for (eval.py's ``decoding.hotwords``/``decoding.hotwords_score`` and
``decoding.lm.path``/``decoding.lm.weight``, transcribe.py's ``--hotwords``/``--hotwords-score`` and
``--lm``/``--lm-weight``), as plain settings that become scorers once the model's
tokenizer is known (`asr_plugin.decoding.fusion`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asr_plugin.decoding.fusion import WeightedScorer
from asr_plugin.decoding.ngram_lm import DEFAULT_LM_WEIGHT, LM_OPTIONS, check_lm_options, lm_fusion
from asr_plugin.decoding.phrase_boosting import PhraseBoosting, PhraseTokenizer, check_score

DEFAULT_HOTWORDS_SCORE = 1.5  # sherpa-onnx's default hotwords_score


@dataclass(frozen=True)
class FusionSpec:
    """What to fuse into the searches.

    Attributes:
        hotwords: a sherpa-onnx hotwords file (one phrase per line, optional `` :score``), or None.
        hotwords_score: the per-token score of a phrase without its own (finite, > 0).
        lm: an ARPA n-gram LM over the tokenizer's pieces or NeMo's words (`asr_plugin.decoding.ngram_lm`), or None.
        lm_weight: what the LM's natural-log scores are multiplied by (finite).
        lm_options: the option names of `lm` and `lm_weight`, for error messages.
    """

    hotwords: str | os.PathLike | None = None
    hotwords_score: float = DEFAULT_HOTWORDS_SCORE
    lm: str | os.PathLike | None = None
    lm_weight: float = DEFAULT_LM_WEIGHT
    lm_options: tuple[str, str] = LM_OPTIONS

    def __post_init__(self) -> None:
        check_score("hotwords_score", self.hotwords_score)
        check_lm_options(self.lm, self.lm_weight, self.lm_options)
        if self.hotwords is not None and not Path(self.hotwords).is_file():
            raise FileNotFoundError(f"hotwords file {self.hotwords}: no such file")

    @classmethod
    def from_config(cls, decoding: Mapping[str, Any]) -> "FusionSpec":
        """The spec of eval.py's ``decoding`` config (``hotwords``, ``hotwords_score``; absent: none, 1.5)."""
        score = decoding.get("hotwords_score")
        lm = decoding.get("lm") or {}
        weight = lm.get("weight")
        return cls(
            decoding.get("hotwords"),
            DEFAULT_HOTWORDS_SCORE if score is None else float(score),
            lm.get("path"),
            DEFAULT_LM_WEIGHT if weight is None else weight,
        )

    def scorers(self, tokenizer: PhraseTokenizer) -> list[WeightedScorer]:
        """The weighted scorers for a model of `tokenizer` (phrases spelt with it; errors name file and line)."""
        lm = lm_fusion(self.lm, self.lm_weight, tokenizer, names=self.lm_options)
        if self.hotwords is None:
            return lm
        return [WeightedScorer(PhraseBoosting.from_file(self.hotwords, tokenizer, self.hotwords_score), 1.0), *lm]

    def record(self) -> dict[str, Any]:
        """What a results summary records of it (nothing without fusion)."""
        record = (
            {} if self.hotwords is None else {"hotwords": str(self.hotwords), "hotwords_score": self.hotwords_score}
        )
        return record if self.lm is None else {**record, "lm": str(self.lm), "lm_weight": self.lm_weight}


NO_FUSION = FusionSpec()  # the joint alone
