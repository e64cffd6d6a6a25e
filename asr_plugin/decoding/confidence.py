"""Token and word confidence with NeMo's measures (``asr_confidence_utils``; Laptev and Ginsburg,
arXiv 2212.08703): the maximum probability, or the Gibbs, Tsallis or Rényi entropy of the step's token
distribution, each with a temperature-like `alpha` and a linear or exponential normalisation.

A token's confidence is the measure of the distribution it was chosen from, log softmax of the joint's V token
scores (blank included) at the step that emitted it: NeMo's ``exclude_blank=True``, for greedy and beam search
alike. A TDT model's duration scores are left out unless ``tdt_include_duration`` (NeMo's
``tdt_include_duration``): then the token's confidence is the `aggregation` of that value and the same measure
of the step's D-duration distribution (log softmax of the D duration scores), normalised as NeMo does with the
token count V, not D, in the formulas below (so a uniform duration distribution does not map to 0). A word's confidence aggregates its tokens' (mean, min,
max or prod) over the tokens `asr_plugin.decoding.timestamps.word_groups` makes a word (SentencePiece's word
marker).

With p the distribution over V symbols, a = `alpha` and the sums over the V symbols, each measure maps a
one-hot p to 1 and the uniform p to 0 (the Gibbs entropy with a != 1, as NeMo weights it, is not largest at the
uniform p, so it can leave [0, 1]):

- max_prob: (max(p)^a V^a - 1) / (V^a - 1)
- entropy, lin normalisation: gibbs 1 + sum(p^a log p) / (log V V^(1-a)); tsallis 1 + (1 - sum p^a) /
  (V^(1-a) - 1); renyi 1 + log2(sum p^a) / ((a - 1) log2 V)
- entropy, exp normalisation: gibbs (exp(a sum(p^a log p)) - V^(-a V^(1-a))) / (1 - V^(-a V^(1-a)));
  tsallis (exp((1 - sum p^a) / (1 - a)) - E) / (1 - E), E = exp((1 - V^(1-a)) / (1 - a));
  renyi ((sum p^a)^(1/(a-1)) V - 1) / (V - 1)
- a = 1: every entropy is Gibbs' (lin: 1 + sum(p log p) / log V; exp: (exp(sum p log p) V - 1) / (V - 1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from asr_plugin.decoding.hypothesis import Hypothesis
from asr_plugin.decoding.timestamps import PieceTokenizer, word_groups

MEASURES = ("max_prob", "entropy")
ENTROPY_TYPES = ("gibbs", "tsallis", "renyi")
NORMALISATIONS = ("lin", "exp")
AGGREGATIONS = ("mean", "min", "max", "prod")


@dataclass(frozen=True)
class ConfidenceMethod:
    """One of NeMo's confidence measures (module docstring); NeMo's defaults.

    Attributes:
        name: "max_prob" or "entropy".
        entropy_type: "gibbs", "tsallis" or "renyi" (entropy only).
        alpha: > 0, the exponent a.
        entropy_norm: "lin" or "exp" (entropy only).
        aggregation: how a word aggregates its tokens' confidence: "mean", "min", "max" or "prod"; with
            `tdt_include_duration`, also how a TDT step's token and duration confidence make its token's.
        tdt_include_duration: a TDT token's confidence includes its step's duration distribution (module
            docstring); no effect on RNN-T.
    """

    name: str = "entropy"
    entropy_type: str = "tsallis"
    alpha: float = 0.33
    entropy_norm: str = "exp"
    aggregation: str = "min"
    tdt_include_duration: bool = False

    def __post_init__(self) -> None:
        for field_name, value, allowed in (
            ("name", self.name, MEASURES),
            ("entropy_type", self.entropy_type, ENTROPY_TYPES),
            ("entropy_norm", self.entropy_norm, NORMALISATIONS),
            ("aggregation", self.aggregation, AGGREGATIONS),
        ):
            if value not in allowed:
                raise ValueError(f"confidence {field_name}={value!r}; choose one of {allowed}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not self.alpha > 0:
            raise ValueError(f"confidence alpha={self.alpha!r} must be a number > 0")
        if not isinstance(self.tdt_include_duration, bool):
            raise TypeError(f"confidence tdt_include_duration={self.tdt_include_duration!r} must be true or false")

    def __call__(self, log_probs: torch.Tensor, size: int | None = None) -> torch.Tensor:
        """(..., V) log-probabilities -> (...) confidence in [0, 1]; `size`: the V of the formulas where it is not
        the distribution's own size (TDT's duration confidence)."""
        x = torch.nan_to_num(log_probs)
        v, a = log_probs.shape[-1] if size is None else size, float(self.alpha)
        if self.name == "max_prob":
            best = x.max(dim=-1).values
            return ((best * a).exp() * v**a - 1) / (v**a - 1)
        if a == 1.0:  # every entropy is Gibbs'
            neg_entropy = (x.exp() * x).sum(-1)
            if self.entropy_norm == "lin":
                return 1 + neg_entropy / math.log(v)
            return (neg_entropy.exp() * v - 1) / (v - 1)
        power_sum = (x * a).exp().sum(-1)  # sum p^a
        if self.entropy_type == "gibbs":
            weighted = ((x * a).exp() * x).sum(-1)  # sum p^a log p
            if self.entropy_norm == "lin":
                return 1 + weighted / math.log(v) / v ** (1 - a)
            floor = v ** (-a * v ** (1 - a))
            return ((weighted * a).exp() - floor) / (1 - floor)
        if self.entropy_type == "tsallis":
            if self.entropy_norm == "lin":
                return 1 + (1 - power_sum) / (v ** (1 - a) - 1)
            floor = math.exp((1 - v ** (1 - a)) / (1 - a))
            return (((1 - power_sum) / (1 - a)).exp() - floor) / (1 - floor)
        if self.entropy_norm == "lin":  # renyi
            return 1 + power_sum.log2() / (a - 1) / math.log2(v)
        return (power_sum.pow(1 / (a - 1)) * v - 1) / (v - 1)

    def step_confidence(self, token_logp: torch.Tensor, duration_logp: torch.Tensor | None = None) -> torch.Tensor:
        """The confidence of the token a step emits: (..., V) token and (..., D) duration log-probabilities of
        the step (None: RNN-T) -> (...). The token measure, or with `tdt_include_duration` and durations the
        `aggregation` of the token and the duration measure (normalised with V, as NeMo's)."""
        token = self(token_logp)
        if duration_logp is None or not self.tdt_include_duration:
            return token
        pair = torch.stack((token, self(duration_logp, size=token_logp.shape[-1])), dim=-1)  # (..., 2)
        if self.aggregation == "mean":
            return pair.mean(-1)
        if self.aggregation == "min":
            return pair.amin(-1)
        if self.aggregation == "max":
            return pair.amax(-1)
        return pair.prod(-1)

    def aggregate(self, values: Sequence[float]) -> float:
        """One value from a non-empty sequence, by `aggregation`."""
        if self.aggregation == "mean":
            return sum(values) / len(values)
        if self.aggregation == "min":
            return min(values)
        if self.aggregation == "max":
            return max(values)
        return math.prod(values)


def word_confidence(hyp: Hypothesis, tokenizer: PieceTokenizer, method: ConfidenceMethod) -> list[float]:
    """Each word's confidence: `method`'s aggregation of its tokens' (words as `word_groups` finds them)."""
    if len(hyp.token_confidence) != len(hyp.tokens):
        raise ValueError("the hypothesis has no token confidence: decode with confidence=ConfidenceMethod(...)")
    groups = word_groups([tokenizer.id_to_piece(token) for token in hyp.tokens])
    return [method.aggregate([hyp.token_confidence[i] for i in group]) for group in groups]


def attach_word_confidence(
    hyps: Sequence[Hypothesis], tokenizer: PieceTokenizer, method: ConfidenceMethod
) -> list[Hypothesis]:
    """Sets ``.word_confidence`` of every hypothesis (`word_confidence`)."""
    for hyp in hyps:
        hyp.word_confidence = word_confidence(hyp, tokenizer, method)
    return list(hyps)
