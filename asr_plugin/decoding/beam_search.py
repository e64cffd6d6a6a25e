"""Modified beam search (at most one symbol per frame), batched over utterances.

The algorithm of icefall/k2's ``modified_beam_search``: every frame extends each hypothesis by
exactly one symbol (blank keeps the token sequence, a token appends itself and the search moves
to the next frame), the `beam` best (hypothesis, symbol) pairs of each utterance survive, and
survivors with the same token sequence are merged by adding their probabilities (log-add).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder, attach_text
from asr_plugin.decoding.validation import check_encoder_output
from asr_plugin.models import Transducer
from asr_plugin.models.predictor import LSTMState


@dataclass
class _Beams:
    """The hypotheses of all still-active utterances, flattened and grouped by utterance.

    Attributes:
        utts: (N,) int64 utterance index of every hypothesis (non-decreasing).
        tokens: N token sequences; timestamps: N matching frame sequences.
        scores: (N,) float64 log-probabilities.
        pred_proj: (N, H_j) projected predictor output of each hypothesis' last token.
        state: the predictor state of each hypothesis, (L, N, H_p) each.
    """

    utts: torch.Tensor
    tokens: list[tuple[int, ...]]
    timestamps: list[tuple[int, ...]]
    scores: torch.Tensor
    pred_proj: torch.Tensor
    state: LSTMState

    def select(self, model: Transducer, index: torch.Tensor) -> "_Beams":
        """Hypotheses `index` (K,) of this set, predictor outputs included."""
        rows = index.tolist()
        return _Beams(
            utts=self.utts[index],
            tokens=[self.tokens[i] for i in rows],
            timestamps=[self.timestamps[i] for i in rows],
            scores=self.scores[index],
            pred_proj=self.pred_proj[index],
            state=model.predictor.select_state(self.state, index),
        )


def _log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) without overflow."""
    high, low = max(a, b), min(a, b)
    return high + math.log1p(math.exp(low - high))


def _initial_beams(model: Transducer, batch_size: int, device: torch.device) -> _Beams:
    """One empty hypothesis (score 0, blank context) per utterance."""
    start = torch.full((batch_size,), model.blank_id, dtype=torch.long, device=device)
    pred_out, state = model.predictor.step(start)  # (B, H_p)
    return _Beams(
        utts=torch.arange(batch_size, device=device),
        tokens=[()] * batch_size,
        timestamps=[()] * batch_size,
        scores=torch.zeros(batch_size, dtype=torch.float64, device=device),
        pred_proj=model.joint.project_predictor(pred_out),
        state=state,
    )


def _expand(model: Transducer, beams: _Beams, enc_frame: torch.Tensor, frame: int, beam: int) -> _Beams:
    """One frame of search: scores every (hypothesis, symbol), keeps `beam` per utterance, merges.

    Args:
        enc_frame: (B, H_j) projected encoder frame `frame` of every utterance of the batch.
    """
    blank = model.blank_id
    logp = model.joint.combine(enc_frame[beams.utts], beams.pred_proj).float().log_softmax(dim=-1)  # (N, V)
    num_hyps, vocab = logp.shape
    candidates = beams.scores[:, None] + logp.double()  # (N, V)

    # Lay each utterance's candidates out in one row of a (B, beam * V) grid, then take the row top-k.
    first = torch.searchsorted(beams.utts, beams.utts)  # (N,) index of the utterance's first hypothesis
    slot = torch.arange(num_hyps, device=logp.device) - first  # (N,) position within the utterance
    grid = torch.full((enc_frame.shape[0], beam * vocab), -math.inf, dtype=torch.float64, device=logp.device)
    columns = slot[:, None] * vocab + torch.arange(vocab, device=logp.device)  # (N, V)
    grid[beams.utts[:, None].expand(-1, vocab), columns] = candidates
    top_scores, top_index = grid.topk(min(beam, beam * vocab), dim=1)  # (B, beam)

    # Merge survivors with equal token sequences (the best one's timestamps and state are kept).
    merged: dict[tuple[int, tuple[int, ...]], list] = {}
    for utt in beams.utts.unique_consecutive().tolist():
        utt_first = int(first[beams.utts == utt][0])
        for score, index in zip(top_scores[utt].tolist(), top_index[utt].tolist()):
            if score == -math.inf:
                break
            source, token = utt_first + index // vocab, index % vocab
            tokens = beams.tokens[source] + ((token,) if token != blank else ())
            key = (utt, tokens)
            if key in merged:
                merged[key][2] = _log_add(merged[key][2], score)
            else:
                stamps = beams.timestamps[source] + ((frame,) if token != blank else ())
                merged[key] = [source, token, score, tokens, stamps]
    entries = list(merged.values())

    device = beams.scores.device
    sources = torch.tensor([e[0] for e in entries], dtype=torch.long, device=device)  # (N',)
    symbols = torch.tensor([e[1] for e in entries], dtype=torch.long, device=device)  # (N',)
    new = beams.select(model, sources)
    new.tokens = [e[3] for e in entries]
    new.timestamps = [e[4] for e in entries]
    new.scores = torch.tensor([e[2] for e in entries], dtype=torch.float64, device=device)
    emitting = (symbols != blank).nonzero().squeeze(1)  # (M,)
    if emitting.numel():
        out, state = model.predictor.step(symbols[emitting], model.predictor.select_state(new.state, emitting))
        new.pred_proj[emitting] = model.joint.project_predictor(out)
        new.state[0][:, emitting], new.state[1][:, emitting] = state
    return new


def _best(beams: _Beams, utt: int) -> Hypothesis:
    """The highest-scoring hypothesis of utterance `utt`."""
    rows = (beams.utts == utt).nonzero().squeeze(1)
    row = int(rows[beams.scores[rows].argmax()])
    return Hypothesis(tokens=list(beams.tokens[row]), score=float(beams.scores[row]), timestamps=list(beams.timestamps[row]))


@torch.no_grad()
def modified_beam_search(
    model: Transducer,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    beam: int = 4,
    tokenizer: TokenDecoder | None = None,
) -> list[Hypothesis]:
    """Modified beam search of a batch; see the module docstring for the algorithm.

    The score of a hypothesis is the log of the summed probability of the alignments of its token
    sequence that survived the beam (each frame contributes one symbol's log-probability, so there
    is no closing blank after a token). ``beam=1`` gives exactly ``greedy_search(...,
    max_symbols_per_frame=1)``. Call ``model.eval()`` first.

    Args:
        model: the transducer (its predictor and joint are used).
        encoder_out: (B, T, H_e) float encoder frames.
        encoder_lengths: (B,) int64 valid frames per utterance.
        beam: >= 1, hypotheses kept per utterance and frame.
        tokenizer: when given, each hypothesis' `.text` is ``tokenizer.decode(tokens)``.
    Returns:
        the best hypothesis of each utterance, in batch order.
    """
    check_encoder_output(encoder_out, encoder_lengths)
    if beam < 1:
        raise ValueError(f"beam={beam} must be >= 1")
    batch_size, num_frames, _ = encoder_out.shape
    lengths = encoder_lengths.tolist()
    enc_proj = model.joint.project_encoder(encoder_out)  # (B, T, H_j)
    beams = _initial_beams(model, batch_size, encoder_out.device)
    results: list[Hypothesis | None] = [None] * batch_size
    for t in range(num_frames + 1):
        ending = [b for b in beams.utts.unique_consecutive().tolist() if lengths[b] <= t]
        for b in ending:
            results[b] = _best(beams, b)
        if ending:
            keep = ~torch.isin(beams.utts, torch.tensor(ending, device=beams.utts.device))
            beams = beams.select(model, keep.nonzero().squeeze(1))
        if t == num_frames or not beams.tokens:
            break
        beams = _expand(model, beams, enc_proj[:, t], t, beam)
    return attach_text([hyp for hyp in results if hyp is not None], tokenizer)
