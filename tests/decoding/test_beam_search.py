"""RNN-T beam search with one symbol per frame (the topology of icefall's modified beam search): exhaustive beams
find the exact best sequence, with and without length normalisation, hand-built model, batching (beam-1 equals
greedy: test_beam_symbols_per_frame.py)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from beam_references import unpruned_choice
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import beam_search, greedy_search


def sequence_log_probs(model, frames: torch.Tensor, step_scores=None) -> dict[tuple[int, ...], float]:
    """Exhaustive one-symbol-per-frame search of one utterance (T, H_e): token sequence -> log of summed prob.
    `step_scores` (optional): (V,) float64 log-probabilities, tokens so far -> (V,) the scores the search adds
    instead (a fused search's)."""
    vocab = model.vocab_size
    totals: dict[tuple[int, ...], float] = {}
    with torch.no_grad():
        for alignment in itertools.product(range(vocab), repeat=frames.shape[0]):
            tokens: tuple[int, ...] = ()
            logp = 0.0
            for t, symbol in enumerate(alignment):
                context = model.predictor(torch.tensor([list(tokens)], dtype=torch.long))[:, -1:]  # (1, 1, H_p)
                step = model.joint(frames[t][None, None], context)[0, 0, 0].log_softmax(-1).double()
                logp += float(step[symbol] if step_scores is None else step_scores(step, tokens)[symbol])
                tokens += (symbol,) if symbol != model.blank_id else ()
            totals[tokens] = float(torch.logaddexp(torch.tensor(totals.get(tokens, -math.inf)), torch.tensor(logp)))
    return totals


@pytest.mark.parametrize("score_norm", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_unpruned_beam_finds_the_exact_best_sequence(seed: int, score_norm: bool) -> None:
    model = tiny_transducer(vocab_size=3, seed=seed)
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=4, seed=seed)
    # 1 + 2 + 4 + 8 + 16 prefixes: no pruning
    hyps = beam_search(model, encoder_out, lengths, beam=31, max_symbols_per_frame=1, score_norm=score_norm)
    for b, hyp in enumerate(hyps):
        totals = sequence_log_probs(model, encoder_out[b, : lengths[b]])
        best = unpruned_choice(totals, score_norm)
        assert tuple(hyp.tokens) == best
        assert hyp.score == pytest.approx(totals[best], abs=1e-5)  # the raw log-probability, never normalised


def test_score_norm_is_the_default_and_picks_a_longer_sequence_here() -> None:
    # seed 1's first utterance: the most probable sequence is not the best per token (+1)
    model = tiny_transducer(vocab_size=3, seed=1)
    encoder_out, lengths = random_encoder_out(model, batch=2, frames=4, seed=1)
    plain = beam_search(model, encoder_out, lengths, beam=31, max_symbols_per_frame=1, score_norm=False)
    normalised = beam_search(model, encoder_out, lengths, beam=31, max_symbols_per_frame=1)
    assert [h.tokens for h in normalised] == [
        h.tokens for h in beam_search(model, encoder_out, lengths, beam=31, max_symbols_per_frame=1, score_norm=True)
    ]
    changed = [(p, n) for p, n in zip(plain, normalised) if p.tokens != n.tokens]
    assert changed and all(len(n.tokens) > len(p.tokens) and n.score < p.score for p, n in changed)
    with pytest.raises(TypeError, match="score_norm"):
        beam_search(model, encoder_out, lengths, score_norm="false")


def table_model(table: dict[tuple[int, int], list[float]], frames: int, vocab: int):
    """A transducer whose joint outputs log(table[(t, last token)]) for the one-hot frame `t`.

    Predictor: identity embedding and an LSTM with saturated gates, so its output is
    tanh(1) * onehot(last token). Joint (ReLU): hidden unit (t, u) fires 1 only when frame t
    meets context u, and the output layer writes the log-probabilities of that cell.
    Returns the model and its (1, T, T) one-hot encoder output.
    """
    model = tiny_transducer(
        vocab,
        d_model=frames,
        num_heads=1,
        ffn_dim=4,
        predictor_embed_dim=vocab,
        predictor_dim=vocab,
        joint_dim=frames * vocab,
        joint_activation="relu",
    )
    sat = 20.0
    pred, joint = model.predictor, model.joint
    with torch.no_grad():
        for p in list(pred.parameters()) + list(joint.parameters()):
            p.zero_()
        pred.embedding.weight.copy_(torch.eye(vocab))
        eye = torch.eye(vocab)
        pred.lstm.weight_ih_l0[2 * vocab : 3 * vocab] = sat * eye  # cell candidate g = tanh(20 x)
        pred.lstm.bias_ih_l0[:vocab] = sat  # input gate open
        pred.lstm.bias_ih_l0[vocab : 2 * vocab] = -sat  # forget gate shut
        pred.lstm.bias_ih_l0[3 * vocab :] = sat  # output gate open
        for t, u in itertools.product(range(frames), range(vocab)):
            unit = t * vocab + u
            joint.encoder_proj.weight[unit, t] = 1.0
            joint.predictor_proj.weight[unit, u] = 1.0 / math.tanh(1.0)
            joint.predictor_proj.bias[unit] = -1.0
            joint.output.weight[:, unit] = torch.tensor(table[(t, u)]).log()
    return model, torch.eye(frames)[None]


def test_beam_finds_the_better_path_that_greedy_misses() -> None:
    # Tokens: 0 blank, 1 "a", 2 "b". Greedy takes "a" (0.5) at frame 0 and then at best 0.4;
    # "b" (0.4) at frame 0 is followed by a confident blank (0.9): 0.36 > 0.2.
    blank_a_b = {
        (0, 0): [0.1, 0.5, 0.4],
        (0, 1): [0.9, 0.05, 0.05],
        (0, 2): [0.9, 0.05, 0.05],
        (1, 0): [0.98, 0.01, 0.01],
        (1, 1): [0.3, 0.4, 0.3],
        (1, 2): [0.9, 0.05, 0.05],
    }
    model, encoder_out = table_model(blank_a_b, frames=2, vocab=3)
    lengths = torch.tensor([2])
    greedy = greedy_search(model, encoder_out, lengths, max_symbols_per_frame=1)[0]
    assert greedy.tokens == [1, 1]
    assert greedy.score == pytest.approx(math.log(0.5 * 0.4), abs=1e-4)
    two = beam_search(model, encoder_out, lengths, beam=2, max_symbols_per_frame=1)[0]
    assert two.tokens == [2] and two.timestamps == [0]
    assert two.score == pytest.approx(math.log(0.4 * 0.9), abs=1e-4)
    # With beam 9 nothing is pruned: the blank-first alignment of "b" (0.1 * 0.01) is merged by log-add.
    full = beam_search(model, encoder_out, lengths, beam=9, max_symbols_per_frame=1)[0]
    assert full.tokens == [2]
    assert full.score == pytest.approx(math.log(0.4 * 0.9 + 0.1 * 0.01), abs=1e-4)


def test_beam_search_batches_like_single_utterances(tokenizer) -> None:
    model = tiny_transducer(seed=7)
    encoder_out, lengths = random_encoder_out(model, batch=4, frames=10, seed=7)
    lengths[2] = 0
    batched = beam_search(model, encoder_out, lengths, beam=4, max_symbols_per_frame=1, tokenizer=tokenizer)
    for b, hyp in enumerate(batched):
        single = beam_search(
            model, encoder_out[b : b + 1], lengths[b : b + 1], beam=4, max_symbols_per_frame=1, tokenizer=tokenizer
        )[0]
        assert hyp.tokens == single.tokens and hyp.text == single.text
        assert hyp.score == pytest.approx(single.score, abs=1e-5)
    assert batched[2].tokens == [] and batched[2].score == 0.0
    with pytest.raises(ValueError, match="beam"):
        beam_search(model, encoder_out, lengths, beam=0)
