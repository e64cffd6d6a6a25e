"""Time-synchronous beam search with up to S symbols per frame, batched over utterances.

The algorithm (time-synchronous decoding of Saon et al. 2020, as NeMo's TSD; with S = 1 exactly
icefall/k2's ``modified_beam_search``), S = `max_symbols_per_frame`:

- Every frame starts with at most `beam` hypotheses per utterance, all *active* (may still emit here).
- A sub-step extends every active hypothesis by one symbol: blank makes it *finished* for this frame
  (same tokens), a token appends itself (timestamp = this frame) and keeps it active, and the
  predictor advances on it. Finished hypotheses are carried over unchanged. Then the `beam` best of
  all these candidates of each utterance, finished and active together, survive, and survivors with
  the same token sequence and the same state (both finished, or both active) are merged by adding
  their probabilities (log-add; the best one's timestamps and predictor state are kept).
- At most S sub-steps run per frame (fewer when no hypothesis is active any more). Hypotheses still
  active after S sub-steps move on to the next frame *without* a blank term, the convention of
  `greedy_search` at its cap. Before the next frame all hypotheses become active again and those with
  the same token sequence are merged by log-add (their futures are identical).

So a hypothesis' score is the log of the summed probability of its token sequence's alignments that
survived the beam, an alignment scoring each frame's tokens and the frame's closing blank (none when
the frame has S tokens). ``beam=1`` is greedy search with the same S: same tokens, timestamps, score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder, attach_text
from asr_plugin.decoding.validation import check_encoder_output
from asr_plugin.losses import RNNT
from asr_plugin.models import Transducer
from asr_plugin.models.predictor import LSTMState


@dataclass
class _Beams:
    """The hypotheses of all still-active utterances, flattened and grouped by utterance.

    Attributes:
        utts: (N,) int64 utterance index of every hypothesis (non-decreasing).
        tokens: N token sequences; timestamps: N matching frame sequences.
        scores: (N,) float64 log-probabilities.
        active: (N,) bool, True while the hypothesis may still emit at the current frame.
        pred_proj: (N, H_j) projected predictor output of each hypothesis' last token.
        state: the predictor state of each hypothesis, (L, N, H_p) each.
    """

    utts: torch.Tensor
    tokens: list[tuple[int, ...]]
    timestamps: list[tuple[int, ...]]
    scores: torch.Tensor
    active: torch.Tensor
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
            active=self.active[index],
            pred_proj=self.pred_proj[index],
            state=model.predictor.select_state(self.state, index),
        )


@dataclass
class _Candidate:
    """One surviving extension: hypothesis `source` of the current set followed by `symbol` (blank: none)."""

    utt: int
    source: int
    symbol: int
    score: float
    active: bool


def _log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) without overflow."""
    high, low = max(a, b), min(a, b)
    return high + math.log1p(math.exp(low - high))


def _initial_beams(model: Transducer, batch_size: int, device: torch.device) -> _Beams:
    """One empty, active hypothesis (score 0, blank context) per utterance."""
    start = torch.full((batch_size,), model.blank_id, dtype=torch.long, device=device)
    pred_out, state = model.predictor.step(start)  # (B, H_p)
    return _Beams(
        utts=torch.arange(batch_size, device=device),
        tokens=[()] * batch_size,
        timestamps=[()] * batch_size,
        scores=torch.zeros(batch_size, dtype=torch.float64, device=device),
        active=torch.ones(batch_size, dtype=torch.bool, device=device),
        pred_proj=model.joint.project_predictor(pred_out),
        state=state,
    )


def _merge(model: Transducer, beams: _Beams, candidates: list[_Candidate], frame: int) -> _Beams:
    """The hypotheses `candidates` make (best first within each utterance), equal ones merged by log-add.

    Candidates with the same utterance, token sequence and `active` flag become one hypothesis scored
    by the log-add of their scores, with the first (best) one's timestamps and predictor state.
    """
    blank = model.blank_id
    merged: dict[tuple[int, bool, tuple[int, ...]], list] = {}
    for c in candidates:
        emits = c.symbol != blank
        tokens = beams.tokens[c.source] + ((c.symbol,) if emits else ())
        key = (c.utt, c.active, tokens)
        if key in merged:
            merged[key][1] = _log_add(merged[key][1], c.score)
        else:
            merged[key] = [c, c.score, tokens, beams.timestamps[c.source] + ((frame,) if emits else ())]
    entries = list(merged.values())
    device = beams.scores.device
    new = beams.select(model, torch.tensor([e[0].source for e in entries], dtype=torch.long, device=device))
    new.tokens = [e[2] for e in entries]
    new.timestamps = [e[3] for e in entries]
    new.scores = torch.tensor([e[1] for e in entries], dtype=torch.float64, device=device)
    new.active = torch.tensor([e[0].active for e in entries], dtype=torch.bool, device=device)
    symbols = torch.tensor([e[0].symbol for e in entries], dtype=torch.long, device=device)  # (N',)
    emitting = (symbols != blank).nonzero().squeeze(1)  # (M,) exactly the active ones after a sub-step
    if emitting.numel():
        out, state = model.predictor.step(symbols[emitting], model.predictor.select_state(new.state, emitting))
        new.pred_proj[emitting] = model.joint.project_predictor(out)
        new.state[0][:, emitting], new.state[1][:, emitting] = state
    return new


def _sub_step(model: Transducer, beams: _Beams, enc_frame: torch.Tensor, frame: int, beam: int) -> _Beams:
    """Extends the active hypotheses by one symbol, keeps `beam` (finished and active) per utterance, merges.

    Args:
        enc_frame: (B, H_j) projected encoder frame `frame` of every utterance of the batch.
    """
    blank = model.blank_id
    rows = beams.active.nonzero().squeeze(1)  # (A,)
    logp = model.joint.combine(enc_frame[beams.utts[rows]], beams.pred_proj[rows]).float().log_softmax(dim=-1)  # (A, V)
    num_hyps, vocab = beams.scores.shape[0], logp.shape[1]
    # A finished hypothesis has one candidate, itself, in its blank column.
    candidates = torch.full((num_hyps, vocab), -math.inf, dtype=torch.float64, device=logp.device)  # (N, V)
    candidates[:, blank] = torch.where(beams.active, -math.inf, beams.scores)
    candidates[rows] = beams.scores[rows, None] + logp.double()

    # Lay each utterance's candidates out in one row of a (B, beam * V) grid, then take the row top-k.
    first = torch.searchsorted(beams.utts, beams.utts)  # (N,) index of the utterance's first hypothesis
    slot = torch.arange(num_hyps, device=logp.device) - first  # (N,) position within the utterance
    grid = torch.full((enc_frame.shape[0], beam * vocab), -math.inf, dtype=torch.float64, device=logp.device)
    columns = slot[:, None] * vocab + torch.arange(vocab, device=logp.device)  # (N, V)
    grid[beams.utts[:, None].expand(-1, vocab), columns] = candidates
    top_scores, top_index = grid.topk(beam, dim=1)  # (B, beam)

    survivors = []
    active = beams.active.tolist()
    for utt in beams.utts.unique_consecutive().tolist():
        utt_first = int(first[beams.utts == utt][0])
        for score, index in zip(top_scores[utt].tolist(), top_index[utt].tolist()):
            if score == -math.inf:
                break
            source, symbol = utt_first + index // vocab, index % vocab
            survivors.append(_Candidate(utt, source, symbol, score, active[source] and symbol != blank))
    return _merge(model, beams, survivors, frame)


def _next_frame(model: Transducer, beams: _Beams, frame: int) -> _Beams:
    """All hypotheses active again, those with the same token sequence merged (best first, log-add)."""
    scores, utts = beams.scores.tolist(), beams.utts.tolist()
    order = sorted(range(len(scores)), key=lambda i: (utts[i], -scores[i]))
    survivors = [_Candidate(utts[i], i, model.blank_id, scores[i], True) for i in order]
    return _merge(model, beams, survivors, frame)


def _best(beams: _Beams, utt: int) -> Hypothesis:
    """The highest-scoring hypothesis of utterance `utt`."""
    rows = (beams.utts == utt).nonzero().squeeze(1)
    row = int(rows[beams.scores[rows].argmax()])
    return Hypothesis(
        tokens=list(beams.tokens[row]), score=float(beams.scores[row]), timestamps=list(beams.timestamps[row])
    )


@torch.no_grad()
def modified_beam_search(
    model: Transducer,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    beam: int = 4,
    tokenizer: TokenDecoder | None = None,
    max_symbols_per_frame: int = 10,
) -> list[Hypothesis]:
    """Beam search of a batch with up to `max_symbols_per_frame` tokens per frame (module docstring).

    The score of a hypothesis is the log of the summed probability of the alignments of its token
    sequence that survived the beam (tokens and each frame's closing blank; a frame that reaches
    `max_symbols_per_frame` tokens has no closing blank, as in greedy search). ``beam=1`` gives
    exactly ``greedy_search(...)`` with the same `max_symbols_per_frame`; ``max_symbols_per_frame=1``
    is icefall's modified beam search (one symbol per frame). Call ``model.eval()`` first.

    Args:
        model: the transducer (its predictor and joint are used).
        encoder_out: (B, T, H_e) float encoder frames.
        encoder_lengths: (B,) int64 valid frames per utterance.
        beam: >= 1, hypotheses kept per utterance after every sub-step.
        tokenizer: when given, each hypothesis' `.text` is ``tokenizer.decode(tokens)``.
        max_symbols_per_frame: >= 1, cap on tokens emitted at one frame (sub-steps per frame);
            the default is greedy search's.
    Returns:
        the best hypothesis of each utterance, in batch order.
    """
    check_encoder_output(encoder_out, encoder_lengths)
    if type(model.lattice) is not RNNT:
        raise ValueError(
            f"modified_beam_search decodes RNN-T models only, not this model's lattice {model.lattice!r}: "
            "use greedy search (decoding method 'greedy')"
        )
    if beam < 1:
        raise ValueError(f"beam={beam} must be >= 1")
    if max_symbols_per_frame < 1:
        raise ValueError(f"max_symbols_per_frame={max_symbols_per_frame} must be >= 1")
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
        for _ in range(max_symbols_per_frame):
            beams = _sub_step(model, beams, enc_proj[:, t], t, beam)
            if not bool(beams.active.any()):
                break
        beams = _next_frame(model, beams, t)
    return attach_text([hyp for hyp in results if hyp is not None], tokenizer)
