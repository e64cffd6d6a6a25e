"""Decoding methods by name, as configured in ``conf/eval.yaml`` (``decoding.methods``)."""

from __future__ import annotations

import torch

from asr_plugin.decoding.beam_search import beam_search
from asr_plugin.decoding.confidence import ConfidenceMethod
from asr_plugin.decoding.fusion import Fusion
from asr_plugin.decoding.greedy import greedy_search
from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder
from asr_plugin.decoding.interface import DecoderJoint
from asr_plugin.models import Transducer

METHODS = ("greedy", "beam")


def decode(
    model: Transducer | DecoderJoint,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    method: str,
    tokenizer: TokenDecoder | None = None,
    beam: int = 4,
    max_symbols_per_frame: int = 10,
    confidence: ConfidenceMethod | None = None,
    fusion: Fusion = (),
    score_norm: bool = True,
) -> list[Hypothesis]:
    """Runs `method` on (B, T, H_e) encoder frames and (B,) lengths.

    Args:
        method: "greedy" (`greedy_search` with `max_symbols_per_frame`) or "beam"
            (`beam_search` with `beam` and `max_symbols_per_frame`); both decode RNN-T and TDT models.
        confidence: when given, each token's confidence by this method (`Hypothesis.token_confidence`).
        fusion: shallow-fusion scorers and their weights (`asr_plugin.decoding.fusion`), for either method.
        score_norm: "beam": choose the result by log-probability / (tokens + 1), as NeMo's ``malsd_batch`` does
            by default (`beam_search`); "greedy" has one hypothesis and ignores it.
    """
    if method == "greedy":
        return greedy_search(model, encoder_out, encoder_lengths, max_symbols_per_frame, tokenizer, confidence, fusion)
    if method == "beam":
        return beam_search(
            model,
            encoder_out,
            encoder_lengths,
            beam,
            tokenizer,
            max_symbols_per_frame,
            confidence,
            fusion,
            score_norm=score_norm,
        )
    raise ValueError(f"decoding method {method!r}; choose one of {METHODS}")
