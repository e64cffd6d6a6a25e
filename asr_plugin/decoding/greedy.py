"""Batched greedy search for transducers."""

from __future__ import annotations

import torch

from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder, attach_text
from asr_plugin.decoding.validation import check_encoder_output
from asr_plugin.models import Transducer


@torch.no_grad()
def greedy_search(
    model: Transducer,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    max_symbols_per_frame: int = 4,
    tokenizer: TokenDecoder | None = None,
) -> list[Hypothesis]:
    """Best-first decoding of a batch, emitting up to `max_symbols_per_frame` tokens per frame.

    At every frame the joint's argmax is taken; a blank moves to the next frame, a token is
    emitted and the predictor advances on it. The score is the sum of the chosen symbols'
    log-probabilities, i.e. the standard RNN-T path log-probability (tokens and the closing blank of
    each frame). When a frame reaches `max_symbols_per_frame` emitted tokens the search moves on
    without a blank and adds no blank term, the convention `modified_beam_search` shares: its tokens,
    timestamps and score equal ``modified_beam_search(..., beam=1)`` with the same `max_symbols_per_frame`.

    Call ``model.eval()`` first: predictor and joint dropout would otherwise randomise the result.

    Args:
        model: the transducer (its predictor and joint are used).
        encoder_out: (B, T, H_e) float encoder frames.
        encoder_lengths: (B,) int64 valid frames per utterance.
        max_symbols_per_frame: >= 1, cap on tokens emitted at one frame.
        tokenizer: when given, each hypothesis' `.text` is ``tokenizer.decode(tokens)``.
    Returns:
        B hypotheses in batch order.
    """
    check_encoder_output(encoder_out, encoder_lengths)
    if max_symbols_per_frame < 1:
        raise ValueError(f"max_symbols_per_frame={max_symbols_per_frame} must be >= 1")
    predictor, joint, blank = model.predictor, model.joint, model.blank_id
    batch_size, num_frames, _ = encoder_out.shape
    device = encoder_out.device
    lengths = encoder_lengths.to(device)

    enc_proj = joint.project_encoder(encoder_out)  # (B, T, H_j)
    start = torch.full((batch_size,), blank, dtype=torch.long, device=device)
    pred_out, state = predictor.step(start)  # (B, H_p), ((L, B, H_p), (L, B, H_p))
    pred_proj = joint.project_predictor(pred_out)  # (B, H_j)

    hyps = [Hypothesis() for _ in range(batch_size)]
    scores = torch.zeros(batch_size, dtype=torch.float64, device=device)
    for t in range(num_frames):
        searching = t < lengths  # (B,) bool: utterances still expecting a symbol at frame t
        for _ in range(max_symbols_per_frame):
            if not bool(searching.any()):
                break
            logits = joint.combine(enc_proj[:, t], pred_proj)  # (B, V)
            best_logp, best = logits.float().log_softmax(dim=-1).max(dim=-1)  # (B,), (B,)
            scores += torch.where(searching, best_logp.double(), 0.0)
            searching = searching & (best != blank)
            emitting = searching.nonzero().squeeze(1)  # (K,)
            if emitting.numel() == 0:
                break
            tokens = best[emitting]  # (K,)
            for index, token in zip(emitting.tolist(), tokens.tolist()):
                hyps[index].tokens.append(token)
                hyps[index].timestamps.append(t)
            out, new_state = predictor.step(tokens, predictor.select_state(state, emitting))
            pred_proj[emitting] = joint.project_predictor(out)
            state[0][:, emitting], state[1][:, emitting] = new_state
    for hyp, score in zip(hyps, scores.tolist()):
        hyp.score = score
    return attach_text(hyps, tokenizer)
