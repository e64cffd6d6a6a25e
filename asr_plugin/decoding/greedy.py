"""Batched greedy search for transducers: RNN-T, and TDT (token-and-duration) models as NeMo decodes them."""

from __future__ import annotations

import torch

from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder, attach_text
from asr_plugin.decoding.validation import check_encoder_output
from asr_plugin.losses import RNNT, TDT
from asr_plugin.models import Transducer


@torch.no_grad()
def greedy_search(
    model: Transducer,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    max_symbols_per_frame: int = 4,
    tokenizer: TokenDecoder | None = None,
) -> list[Hypothesis]:
    """Best-first decoding of a batch, emitting up to `max_symbols_per_frame` tokens per frame, by the greedy
    step of the model's lattice (``GREEDY_SEARCHES[type(model.lattice)]``): `rnnt_greedy_search` for ``RNNT``,
    `tdt_greedy_search` (NeMo's TDT ``greedy_batch``) for ``TDT``.

    Call ``model.eval()`` first: predictor and joint dropout would otherwise randomise the result.

    Args:
        model: the transducer (its lattice, predictor and joint are used).
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
    search = GREEDY_SEARCHES.get(type(model.lattice))
    if search is None:
        raise ValueError(
            f"greedy search has no step for the lattice {model.lattice!r} (it decodes "
            f"{sorted(kind.__name__ for kind in GREEDY_SEARCHES)})"
        )
    return search(model, encoder_out, encoder_lengths, max_symbols_per_frame, tokenizer)


@torch.no_grad()
def rnnt_greedy_search(
    model: Transducer,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    max_symbols_per_frame: int = 4,
    tokenizer: TokenDecoder | None = None,
) -> list[Hypothesis]:
    """Greedy search of an RNN-T model: at every frame the joint's argmax is taken; a blank moves to the next
    frame, a token is emitted and the predictor advances on it. The score is the sum of the chosen symbols'
    log-probabilities, i.e. the standard RNN-T path log-probability (tokens and the closing blank of
    each frame). When a frame reaches `max_symbols_per_frame` emitted tokens the search moves on
    without a blank and adds no blank term, the convention `modified_beam_search` shares: its tokens,
    timestamps and score equal ``modified_beam_search(..., beam=1)`` with the same `max_symbols_per_frame`.

    Args and returns as `greedy_search` (which checks them).
    """
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


@torch.no_grad()
def tdt_greedy_search(
    model: Transducer,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    max_symbols_per_frame: int = 4,
    tokenizer: TokenDecoder | None = None,
) -> list[Hypothesis]:
    """Greedy search of a TDT model, the way NeMo's TDT ``greedy_batch`` (label looping) decodes.

    Per utterance, from frame t = 0 with the predictor on the start symbol: the joint's output at (t, state)
    gives the best token (argmax of the V token scores) and the best duration d (argmax of the duration
    scores; a blank whose best duration is 0 advances 1 frame instead); t += d. After a blank the search
    keeps reading the frames it lands on, with the same predictor state, until a token comes or t passes
    the last frame. A token is emitted with timestamp the frame it was found at, and the predictor advances
    on it; a token of duration 0 keeps t, so the next token may come from the same frame. When
    `max_symbols_per_frame` consecutive tokens share a frame and t is still that frame, t moves on by one
    (no blank is scored). Score: the sum over the chosen steps of log softmax(tokens)[token] +
    log softmax(durations)[duration] (the duration taken: 1 for a blank whose best was 0).

    Args and returns as `greedy_search` (which checks them).
    """
    predictor, joint, blank = model.predictor, model.joint, model.blank_id
    batch_size, num_frames, _ = encoder_out.shape
    device = encoder_out.device
    lengths = encoder_lengths.to(device)
    vocab = model.vocab_size
    durations = torch.tensor(model.lattice.durations, dtype=torch.long, device=device)  # (D,)
    # a blank whose best duration is 0 advances one frame, scored with duration 1's log-prob (when there is one)
    ones = (durations == 1).nonzero().squeeze(1)
    rows = torch.arange(batch_size, device=device)
    last_frame = (lengths - 1).clamp(min=0)

    enc_proj = joint.project_encoder(encoder_out)  # (B, T, H_j)
    start = torch.full((batch_size,), blank, dtype=torch.long, device=device)
    pred_out, state = predictor.step(start)
    pred_proj = joint.project_predictor(pred_out)  # (B, H_j)

    def read(frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B,) frames -> (B,) best tokens, (B,) durations taken, (B,) float64 step scores."""
        logits = joint.combine(enc_proj[rows, torch.minimum(frames, last_frame)], pred_proj).float()  # (B, V + D)
        token_logp, token = logits[:, :vocab].log_softmax(-1).max(-1)
        duration_logp = logits[:, vocab:].log_softmax(-1)  # (B, D)
        index = duration_logp.argmax(-1)
        stays = (token == blank) & (durations[index] == 0)
        step = torch.where(stays, 1, durations[index])
        if ones.numel():
            index = torch.where(stays, ones[0], index)
        return token, step, (token_logp + duration_logp[rows, index]).double()

    hyps = [Hypothesis() for _ in range(batch_size)]
    scores = torch.zeros(batch_size, dtype=torch.float64, device=device)
    time = torch.zeros(batch_size, dtype=torch.long, device=device)
    last_token_frame = torch.full((batch_size,), -1, dtype=torch.long, device=device)
    tokens_at_frame = torch.zeros(batch_size, dtype=torch.long, device=device)
    active = time < lengths
    while bool(active.any()):
        found_at = time.clone()
        token, step, score = read(time)
        scores += torch.where(active, score, 0.0)
        time = time + step * active
        looking = active & (token == blank) & (time < lengths)
        while bool(looking.any()):  # after a blank: same predictor state, the frame it landed on
            found_at = torch.where(looking, time, found_at)
            more_token, more_step, more_score = read(time)
            token = torch.where(looking, more_token, token)
            scores += torch.where(looking, more_score, 0.0)
            time = torch.where(looking, time + more_step, time)
            looking = looking & (token == blank) & (time < lengths)
        found = active & (token != blank)
        emitting = found.nonzero().squeeze(1)  # (K,)
        if emitting.numel():
            for index, (value, frame) in zip(
                emitting.tolist(), zip(token[emitting].tolist(), found_at[emitting].tolist())
            ):
                hyps[index].tokens.append(value)
                hyps[index].timestamps.append(frame)
            out, new_state = predictor.step(token[emitting], predictor.select_state(state, emitting))
            pred_proj[emitting] = joint.project_predictor(out)
            state[0][:, emitting], state[1][:, emitting] = new_state
            same = found_at == last_token_frame
            tokens_at_frame = torch.where(found, torch.where(same, tokens_at_frame + 1, 1), tokens_at_frame)
            last_token_frame = torch.where(found, found_at, last_token_frame)
            stuck = found & (time < lengths) & (tokens_at_frame >= max_symbols_per_frame) & (last_token_frame == time)
            time = time + stuck.long()
        active = time < lengths
    for hyp, score in zip(hyps, scores.tolist()):
        hyp.score = score
    return attach_text(hyps, tokenizer)


# The greedy step of each lattice the models use (adding a lattice adds its step here).
GREEDY_SEARCHES = {RNNT: rnnt_greedy_search, TDT: tdt_greedy_search}
