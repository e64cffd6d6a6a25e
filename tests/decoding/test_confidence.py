"""Token and word confidence (NeMo's max_prob and gibbs/tsallis/renyi entropies, lin and exp normalisation,
alpha) against a float64 reference written here from the formulas, and through greedy and beam search of RNN-T
and TDT models: each token's value is the measure of the distribution it was chosen from."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from greedy_references import tdt_model
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import (
    ConfidenceMethod,
    Hypothesis,
    StreamingGreedyDecoder,
    beam_search,
    decode,
    greedy_search,
    word_confidence,
)


def reference(method: ConfidenceMethod, p: np.ndarray, v: int | None = None) -> float:
    """One distribution p in float64: the measure as the literature writes it (H: the entropy), normalised for
    `v` symbols (default: p's own size)."""
    v, a = len(p) if v is None else v, method.alpha
    if method.name == "max_prob":
        return (p.max() ** a * v**a - 1) / (v**a - 1)
    logp = np.log(p)
    kind = "gibbs" if a == 1.0 else method.entropy_type
    if kind == "gibbs":
        h = -np.sum(p**a * logp)  # alpha-weighted Gibbs entropy
        h_max = math.log(v) * v ** (1 - a)  # its value at the uniform p
        return (
            1 - h / h_max
            if method.entropy_norm == "lin"
            else (math.exp(-a * h) - math.exp(-a * h_max)) / (1 - math.exp(-a * h_max))
        )
    if kind == "tsallis":
        h = (1 - np.sum(p**a)) / (a - 1)
        h_max = (1 - v ** (1 - a)) / (a - 1)
        return (
            1 - h / h_max
            if method.entropy_norm == "lin"
            else (math.exp(-h) - math.exp(-h_max)) / (1 - math.exp(-h_max))
        )
    h = math.log2(np.sum(p**a)) / (1 - a)  # renyi, in bits
    h_max = math.log2(v)
    return 1 - h / h_max if method.entropy_norm == "lin" else (2 ** (-h) * v - 1) / (v - 1)


METHODS = [ConfidenceMethod("max_prob", alpha=a) for a in (1.0, 0.5)] + [
    ConfidenceMethod("entropy", kind, a, norm)
    for kind in ("gibbs", "tsallis", "renyi")
    for a in (1.0, 0.33, 0.75)
    for norm in ("lin", "exp")
]


@pytest.mark.parametrize("method", METHODS, ids=repr)
def test_measures_equal_the_float64_reference(method: ConfidenceMethod) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (6, 9))
    logits[0] = 0.0  # uniform: 0
    logits[1] = -60.0
    logits[1, 3] = 60.0  # one-hot up to float: 1
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    got = method(torch.from_numpy(np.log(p)))
    want = [reference(method, row) for row in p]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-9)
    assert abs(want[0]) < 1e-9 and abs(want[1] - 1) < 1e-6
    if not (method.name == "entropy" and method.entropy_type == "gibbs" and method.alpha != 1.0):
        # (NeMo's alpha-weighted Gibbs entropy is not largest at the uniform p, so it may leave [0, 1])
        assert all(-1e-12 <= value <= 1 + 1e-12 for value in want)


def step_distributions(model, frames: torch.Tensor, prefix: list[int], frame: int) -> tuple[np.ndarray, np.ndarray]:
    """The V token and the D duration probabilities (none for RNN-T) at (frame, predictor after `prefix`),
    float64."""
    context = model.predictor(torch.tensor([prefix], dtype=torch.long))[:, -1:]
    logits = model.joint(frames[frame][None, None], context)[0, 0, 0].double()
    return logits[: model.vocab_size].softmax(-1).numpy(), logits[model.vocab_size :].softmax(-1).numpy()


def assert_token_confidence(model, encoder_out: torch.Tensor, hyps, expected) -> None:
    """Each token's confidence is `expected`(token, duration probabilities) of the step that emitted it."""
    assert sum(len(h.tokens) for h in hyps) > 5
    with torch.no_grad():
        for b, hyp in enumerate(hyps):
            assert len(hyp.token_confidence) == len(hyp.tokens)
            for i, (frame, value) in enumerate(zip(hyp.timestamps, hyp.token_confidence)):
                distributions = step_distributions(model, encoder_out[b], hyp.tokens[:i], frame)
                assert value == pytest.approx(expected(*distributions), abs=1e-5)


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_searches_give_each_token_the_measure_of_its_distribution(lattice: str, search: str) -> None:
    model = tdt_model(2) if lattice == "tdt" else tiny_transducer(seed=2)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=8, seed=2)
    method = ConfidenceMethod("entropy", "renyi", 0.5, "lin")
    hyps = decode(model, encoder_out, lengths, search, beam=3, max_symbols_per_frame=2, confidence=method)
    assert_token_confidence(model, encoder_out, hyps, lambda tokens, _: reference(method, tokens))
    plain = (
        greedy_search(model, encoder_out, lengths, 2)
        if search == "greedy"
        else beam_search(model, encoder_out, lengths, 3, None, 2)
    )
    assert [h.tokens for h in plain] == [h.tokens for h in hyps] and all(not h.token_confidence for h in plain)


AGGREGATE = {"mean": np.mean, "min": min, "max": max, "prod": math.prod}


@pytest.mark.parametrize(
    "search, aggregation", [("greedy", "mean"), ("greedy", "prod"), ("beam", "min"), ("streaming", "max")]
)
def test_tdt_duration_confidence_aggregates_the_token_and_the_duration_measure(search: str, aggregation: str) -> None:
    """NeMo's tdt_include_duration: a TDT token's confidence is the aggregation of the measure of its step's token
    distribution and that of the step's duration distribution (normalised with the V tokens, as NeMo does); an
    RNN-T model ignores the setting."""
    model = tdt_model(4)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=9, seed=4)
    method = ConfidenceMethod("entropy", "tsallis", 0.5, "exp", aggregation, tdt_include_duration=True)
    if search == "streaming":
        decoder = StreamingGreedyDecoder(model, 2, method)
        state = decoder.step(encoder_out, lengths, decoder.initial_state(3))
        hyps = decoder.hypotheses(state)
    else:
        hyps = decode(model, encoder_out, lengths, search, beam=3, max_symbols_per_frame=2, confidence=method)
    assert_token_confidence(
        model,
        encoder_out,
        hyps,
        lambda tokens, durations: AGGREGATE[aggregation](
            [reference(method, tokens), reference(method, durations, v=len(tokens))]
        ),
    )
    rnnt = tiny_transducer(seed=4)
    rnnt_out, rnnt_lengths = random_encoder_out(rnnt, batch=3, frames=9, seed=4)
    without = ConfidenceMethod("entropy", "tsallis", 0.5, "exp", aggregation)
    assert [h.token_confidence for h in greedy_search(rnnt, rnnt_out, rnnt_lengths, 2, confidence=method)] == [
        h.token_confidence for h in greedy_search(rnnt, rnnt_out, rnnt_lengths, 2, confidence=without)
    ]


class Pieces:
    pieces = ["<blk>", "▁a", "b", "▁c", "d", "e", "▁f"]

    def id_to_piece(self, token_id: int) -> str:
        return self.pieces[token_id]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i] for i in ids).replace("▁", " ").strip()


@pytest.mark.parametrize("aggregation", ["mean", "min", "max", "prod"])
def test_word_confidence_aggregates_the_tokens_of_each_word(aggregation: str) -> None:
    values = [0.9, 0.5, 0.8, 0.4, 0.7, 0.6]
    hyp = Hypothesis(tokens=[1, 2, 3, 4, 5, 6], token_confidence=values)
    combine = AGGREGATE[aggregation]
    got = word_confidence(hyp, Pieces(), ConfidenceMethod(aggregation=aggregation))
    assert got == pytest.approx([combine(values[:2]), combine(values[2:5]), combine(values[5:])])
    with pytest.raises(ValueError, match="no token confidence"):
        word_confidence(Hypothesis(tokens=[1]), Pieces(), ConfidenceMethod())
    with pytest.raises(ValueError, match="aggregation"):
        ConfidenceMethod(aggregation="median")
    with pytest.raises(ValueError, match="alpha"):
        ConfidenceMethod(alpha=0)
    with pytest.raises(TypeError, match="tdt_include_duration"):
        ConfidenceMethod(tdt_include_duration="yes")


def test_streamed_confidence_equals_offline() -> None:
    model = tdt_model(3)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=10, seed=3)
    method = ConfidenceMethod("max_prob", alpha=0.5)
    offline = greedy_search(model, encoder_out, lengths, 2, confidence=method)
    decoder = StreamingGreedyDecoder(model, 2, method)
    state = decoder.initial_state(3)
    for start in range(0, 10, 3):
        counts = (lengths - start).clamp(0, 3)
        state = decoder.step(encoder_out[:, start : start + 3], counts, state)
    for streamed, want in zip(decoder.hypotheses(state), offline, strict=True):
        assert streamed.tokens == want.tokens and streamed.token_confidence == pytest.approx(want.token_confidence)
    assert sum(len(h.token_confidence) for h in offline) > 5
