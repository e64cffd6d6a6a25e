"""Plain per-utterance references of the greedy searches and the tiny TDT model the decoding tests share
(tests/decoding is on sys.path for its test files, so they import this module by name)."""

from __future__ import annotations

from typing import Callable

import torch
from tiny_models import tiny_transducer

DURATIONS = [0, 1, 2, 3, 4]

TokenBonus = Callable[[list[int]], torch.Tensor]  # tokens so far -> (V,) float64 added to the token log-probs


def _choose(
    logp: torch.Tensor, bonus: TokenBonus | None, tokens: list[int], blank: int, blank_competes: bool
) -> tuple[int, float]:
    """The chosen symbol and its score from the (V,) token log-probs and a shallow-fusion bonus over the non-blank
    tokens (none: the argmax). NeMo's greedy rule: the blank when the plain argmax is the blank, else the best
    non-blank token by log-prob plus bonus; `blank_competes`: the argmax of the fused scores, blank among them
    (what a width-1 beam does)."""
    if bonus is None:
        k = int(logp.argmax())
        return k, float(logp[k])
    fused = logp.double() + bonus(tokens)
    fused[blank] = logp[blank]
    if blank_competes or int(logp.argmax()) == blank:
        k = int(fused.argmax())
    else:
        k = max((v for v in range(logp.shape[0]) if v != blank), key=lambda v: float(fused[v]))
    return k, float(fused[k])


def reference_greedy(
    model, frames: torch.Tensor, max_symbols: int, bonus: TokenBonus | None = None, blank_competes: bool = False
) -> tuple[list[int], list[int], float]:
    """Unbatched textbook greedy search of one utterance: (T, H_e) -> tokens, timestamps, score; with `bonus`,
    choosing and scoring by the token log-probs plus it (shallow fusion, `_choose`)."""
    tokens, stamps, score = [], [], 0.0
    last = torch.tensor([model.blank_id])
    out, state = model.predictor.step(last)
    for t in range(frames.shape[0]):
        for _ in range(max_symbols):
            logits = model.joint(frames[t][None, None], out[:, None])[0, 0, 0]  # (V,)
            k, s = _choose(logits.log_softmax(-1), bonus, tokens, model.blank_id, blank_competes)
            score += s
            if k == model.blank_id:
                break
            tokens.append(k)
            stamps.append(t)
            out, state = model.predictor.step(torch.tensor([k]), state)
    return tokens, stamps, score


def tdt_model(seed: int):
    """A tiny TDT model whose joint often predicts duration 0 for tokens (several tokens per frame)."""
    model = tiny_transducer(seed=seed, lattice={"kind": "tdt", "durations": DURATIONS})
    with torch.no_grad():
        vocab = model.vocab_size
        model.joint.output.bias[vocab:] = torch.tensor([0.8, 0.5, 0.0, -0.2, -0.4])  # duration scores
    return model


@torch.no_grad()
def reference_tdt_greedy(
    model, frames: torch.Tensor, max_symbols: int, bonus: TokenBonus | None = None, blank_competes: bool = False
) -> tuple[list[int], list[int], float]:
    """One utterance, one step at a time, as NeMo's TDT greedy_batch does: (T, H_e) -> tokens, timestamps, score
    (with `bonus`: the token chosen and scored by `_choose` with NeMo's rule, as shallow fusion).

    At frame t the best token k and best duration d (a blank with d = 0 takes 1); t += d; after a blank,
    read again at the new frame with the same predictor state until a token or the end; a token is emitted
    at the frame it was read at; max_symbols tokens at one frame with t still there move t on by one."""
    vocab, blank = model.vocab_size, model.blank_id
    out, state = model.predictor.step(torch.tensor([blank]))
    tokens, stamps, score = [], [], 0.0
    t, last_frame, count = 0, -1, 0
    num_frames = frames.shape[0]

    def read(t: int) -> tuple[int, int, float]:
        logits = model.joint(frames[t][None, None], out[:, None])[0, 0, 0].double()  # (V + D,)
        token_logp, duration_logp = logits[:vocab].log_softmax(-1), logits[vocab:].log_softmax(-1)
        k, token_score = _choose(token_logp, bonus, tokens, blank, blank_competes)
        i = int(duration_logp.argmax())
        if k == blank and DURATIONS[i] == 0:
            i = DURATIONS.index(1)
        return k, DURATIONS[i], token_score + float(duration_logp[i])

    while t < num_frames:
        found_at = t
        k, d, s = read(t)
        score, t = score + s, t + d
        while k == blank and t < num_frames:
            found_at = t
            k, d, s = read(t)
            score, t = score + s, t + d
        if k != blank:
            tokens.append(k)
            stamps.append(found_at)
            out, state = model.predictor.step(torch.tensor([k]), state)
            count = count + 1 if found_at == last_frame else 1
            last_frame = found_at
            if t < num_frames and count >= max_symbols and last_frame == t:
                t += 1
    return tokens, stamps, score
