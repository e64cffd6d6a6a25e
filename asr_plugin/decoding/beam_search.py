"""Batched beam search for RNN-T and TDT, label-synchronous and vectorised over beams and utterances, in the
design of NeMo's ``malsd_batch`` (modified alignment-length-synchronous decoding).

Every utterance b keeps `beam` hypotheses, each with its own frame pointer t (the frame it reads next), token
sequence, predictor state and score; all B * beam of them advance together, one symbol per step:

- A hypothesis with t < T_b reads the joint at (t, its predictor state) and offers one candidate per symbol:
  RNN-T: blank (t + 1) and every token k (t stays: the next token may come from the same frame); TDT: every
  (token, duration d) pair, t + d, blank with d = 0 excluded (it would not move). A token's timestamp is the
  frame it was read at; the predictor advances on it. When `max_symbols_per_frame` tokens came from frame t
  and t is still there, t moves on by one with no blank scored (the convention of `greedy_search`).
- A hypothesis with t >= T_b is finished: its one candidate is itself, unchanged.
- The `beam` best candidates of each utterance survive (one ``topk`` over beam x symbols per utterance); then
  survivors with the same token sequence and the same frame pointer (finished ones: the same token sequence)
  are merged into the best of them by adding their probabilities (log-add), as NeMo's ``malsd_batch``
  recombines its hypotheses. Their futures are the same except for the `max_symbols_per_frame` cap: two
  alignments of the same tokens can have emitted different numbers of them at the current frame, and the merged
  hypothesis keeps its best member's count, as NeMo's does. Keeping such near-twins apart instead (exact while
  the cap binds) fills the beam with them: on the NeMo-trained RNN-T of docs/decoding.md, with NeMo's cap of
  10, that made beam 4 keep fewer distinct hypotheses than NeMo's and lose to it, while this rule gives
  ``malsd_batch``'s transcripts. With a cap of 1 the count is always 0 when hypotheses merge, so nothing is
  approximate.
- The search ends when every hypothesis is finished; the best one of each utterance is its result: with
  `score_norm` (the default, as NeMo's ``malsd_batch`` with its default ``score_norm=True``) the one of the highest
  score / (number of tokens + 1) (the +1 counts the start symbol, as NeMo's non-batched searches do), without it
  the one of the highest score.

Two settings give sherpa-onnx's search for NeMo transducers (its ``modified_beam_search`` of
``offline-transducer-modified-beam-search-nemo-decoder.cc``), which is frame-synchronous and keeps duplicates:
``schedule="lowest_frame"`` extends only the hypotheses at their utterance's lowest frame pointer (a hypothesis
that moved past it waits, its one candidate itself, until the others catch up; a token keeps its hypothesis at
its frame, so every frame's tokens are found before any hypothesis reads the next one), and ``merge=False`` keeps
hypotheses of the same tokens apart (each alignment competes alone for its slot). The default, ``"label"`` with
merging, extends every unfinished hypothesis at every step, as NeMo's ``malsd_batch``.

Scores: a candidate adds the natural-log probability of its symbol, log softmax(token scores)[k] (TDT: plus
log softmax(duration scores)[d]); a hypothesis' score is the log of the summed probability of the alignments
of its token sequence that survived the beam. Without fusion ``beam=1`` is greedy search with the same
`max_symbols_per_frame` (same tokens, timestamps and score: RNN-T always; TDT wherever greedy's best choice is a
candidate, i.e. it never meets a blank whose best duration is 0, which greedy moves on by 1); with a beam too
large to prune anything, the result is the token sequence of the highest total probability under this topology
(with `score_norm`: of the highest log-probability / (tokens + 1)) where the cap never binds differently for
merged hypotheses: always with ``max_symbols_per_frame=1``. The normalisation only chooses: a
hypothesis' `score` is its log-probability, never divided (NeMo's hypotheses keep the raw score too). It
favours longer outputs, whose summed log-probability is lower only because they have more terms; `beam=1` has
one hypothesis to choose from, so it does not change greedy's equality.

Shallow fusion (`fusion`: an n-gram LM, phrase boosting; `asr_plugin.decoding.fusion`): a token candidate adds
the weighted scores of every scorer from its hypothesis' scorer states (`fused_token_scores`: TDT's durations
untouched); each hypothesis keeps its scorers' states, gathered with it, and two hypotheses merge only when their
scorer states are equal too (with equal tokens they always are: a scorer is a deterministic automaton). The
scorers' final scores are added when the best hypothesis is chosen; `lm_final` False leaves out the language
models' (their end-of-sentence scores), as NeMo's ``malsd_batch`` does. The blank is scored by `blank_lm_score_mode`, NeMo's option of the same name with ``pruning_mode=late``
(every symbol's fused score before the one ``topk``):

- ``"lm_weighted_full"`` (the default, NeMo's with an LM): with language models of summed weight a among the
  scorers (`language_model_weight`; phrase boosting does not count), the blank scores (1 + a) x log P(blank) and
  every token adds a x log(1 - P(blank)) before its fused scores (`lm_weighted_blank`). NeMo sums the weights of
  all its fusion models, its boosting tree's included: the same as ours with an LM alone.
- ``"no_score"``: the blank's score is the joint's alone, and competes with the fused tokens.

So with fusion ``beam=1`` is not `greedy_search` (which keeps NeMo's greedy rule: the joint alone decides blank or
token) but the greedy search whose argmax is over these scores, blank included. With a beam too large to prune,
the result maximises the log-sum over a sequence's alignments of these per-symbol scores, plus the scorers'
weighted final scores (with `score_norm`: that total divided by tokens + 1; NeMo normalises its fused scores the
same way).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from asr_plugin.decoding.confidence import ConfidenceMethod
from asr_plugin.decoding.fusion import (
    Fusion,
    ScorerStates,
    check_blank_lm_score_mode,
    check_fusion,
    chosen_states,
    final_scores,
    fused_token_scores,
    initial_scorer_states,
    language_model_weight,
    lm_weighted_blank,
    where_states,
)
from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder, attach_text
from asr_plugin.decoding.interface import DecoderJoint, PredictorState, decoder_joint, select_state, where_state
from asr_plugin.decoding.validation import check_encoder_output, check_int
from asr_plugin.models import Transducer

NEG_INF = float("-inf")
SCHEDULES = ("label", "lowest_frame")


@dataclass(frozen=True)
class _Beams:
    """B utterances' `beam` hypotheses each, (B, K) tensors unless said.

    Attributes:
        scores: float64 log-probabilities; -inf marks an empty slot.
        time: int64 the frame each hypothesis reads next.
        tokens_at_frame: int64 tokens emitted at frame ``time`` so far (for `max_symbols_per_frame`).
        last_token: int64 the last token (blank before the first).
        lengths: int64 tokens emitted.
        labels, frames, durations: (B, K, L) int64 each token, the frame it was read at and the frames it covers
            (`Hypothesis.durations`: RNN-T 1, TDT its duration), valid up to ``lengths``, 0 after.
        confidences: (B, K, L) float64 each token's confidence (0 without a confidence method).
        predictor_proj: (B * K, H_j) the projected predictor output after the last token.
        predictor_state: the predictor state of the B * K hypotheses.
        scorer_states: each fusion scorer's (B, K) int64 states (empty without fusion).
    """

    scores: torch.Tensor
    time: torch.Tensor
    tokens_at_frame: torch.Tensor
    last_token: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor
    frames: torch.Tensor
    durations: torch.Tensor
    confidences: torch.Tensor
    predictor_proj: torch.Tensor
    predictor_state: PredictorState
    scorer_states: ScorerStates

    def gather(self, source: torch.Tensor) -> "_Beams":
        """The hypotheses ``source`` ((B, K) indices into each utterance's K) of this set."""
        batch, beam = source.shape
        flat = (source + torch.arange(batch, device=source.device)[:, None] * beam).reshape(-1)  # (B * K,)
        per_token = source[:, :, None].expand(-1, -1, self.labels.shape[2])
        return _Beams(
            scores=self.scores.gather(1, source),
            time=self.time.gather(1, source),
            tokens_at_frame=self.tokens_at_frame.gather(1, source),
            last_token=self.last_token.gather(1, source),
            lengths=self.lengths.gather(1, source),
            labels=self.labels.gather(1, per_token),
            frames=self.frames.gather(1, per_token),
            durations=self.durations.gather(1, per_token),
            confidences=self.confidences.gather(1, per_token),
            predictor_proj=self.predictor_proj[flat],
            predictor_state=select_state(self.predictor_state, flat),
            scorer_states=tuple(states.gather(1, source) for states in self.scorer_states),
        )

    def with_room(self) -> "_Beams":
        """The same hypotheses with room for one more token in every sequence buffer (doubled when full)."""
        size = self.labels.shape[2]
        if int(self.lengths.max()) < size:
            return self
        pad = torch.zeros_like(self.labels[:, :, : max(size, 8)])
        return replace(
            self,
            labels=torch.cat([self.labels, pad], 2),
            frames=torch.cat([self.frames, pad], 2),
            durations=torch.cat([self.durations, pad], 2),
            confidences=torch.cat([self.confidences, pad.double()], 2),
        )


class BatchedBeamSearch:
    """The search of the module docstring for one model, beam and symbol cap.

    Args:
        model: the transducer, or any `DecoderJoint` (an exported model); RNN-T or TDT.
        beam: >= 1 hypotheses kept per utterance.
        max_symbols_per_frame: >= 1 cap on tokens emitted at one frame.
        confidence: when given, every token's confidence by this method (`Hypothesis.token_confidence`): the
            measure of the distribution the token was chosen from.
        fusion: shallow-fusion scorers and their weights (the module docstring); empty: the joint alone.
        blank_lm_score_mode: "lm_weighted_full" or "no_score": how the blank is scored with a language model
            among the scorers (the module docstring).
        lm_final: whether the language models' end-of-sentence scores count in choosing the best hypothesis.
        score_norm: choose each utterance's result by score / (tokens + 1), as NeMo (the module docstring);
            False: by score.
        schedule: "label" (every unfinished hypothesis extends at every step) or "lowest_frame" (only those at
            their utterance's lowest frame; the module docstring).
        merge: whether hypotheses with identical futures are merged (`merge`).
    """

    def __init__(
        self,
        model: Transducer | DecoderJoint,
        beam: int = 4,
        max_symbols_per_frame: int = 10,
        confidence: ConfidenceMethod | None = None,
        fusion: Fusion = (),
        blank_lm_score_mode: str = "lm_weighted_full",
        lm_final: bool = True,
        score_norm: bool = True,
        schedule: str = "label",
        merge: bool = True,
    ) -> None:
        check_int("beam", beam, 1)
        if not isinstance(score_norm, bool):
            raise TypeError(f"score_norm must be True or False, not {score_norm!r}")
        check_int("max_symbols_per_frame", max_symbols_per_frame, 1)
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule {schedule!r}; choose one of {SCHEDULES}")
        if not isinstance(merge, bool):
            raise TypeError(f"merge must be a bool, got {type(merge).__name__}")
        self.schedule, self.merge_equal = schedule, merge
        self.decoder = decoder_joint(model)
        self.fusion = check_fusion(fusion, self.decoder.vocab_size, self.decoder.blank_id)
        weighted = check_blank_lm_score_mode(blank_lm_score_mode) == "lm_weighted_full"
        self.blank_weight = language_model_weight(self.fusion) if weighted else 0.0  # a of lm_weighted_blank
        self.lm_final = lm_final
        self.confidence = confidence
        self.beam = beam
        self.max_symbols_per_frame = max_symbols_per_frame
        self.score_norm = score_norm
        durations = self.decoder.durations
        self.durations = None if durations is None else torch.tensor(durations, dtype=torch.long)

    @torch.no_grad()
    def __call__(self, encoder_out: torch.Tensor, encoder_lengths: torch.Tensor) -> list[Hypothesis]:
        """(B, T, H_e) frames, (B,) lengths -> the best hypothesis of each utterance, in batch order."""
        check_encoder_output(encoder_out, encoder_lengths)
        frame_dim = self.decoder.frame_dim
        if frame_dim is not None and encoder_out.shape[2] != frame_dim:
            raise ValueError(f"encoder_out has H_e={encoder_out.shape[2]}, the model's encoder {frame_dim}")
        device = encoder_out.device
        frames = self.decoder.project_frames(encoder_out)  # (B, T, H_j)
        lengths = encoder_lengths.to(device)[:, None]  # (B, 1)
        beams = self.initial_beams(encoder_out.shape[0], device)
        while bool(((beams.time < lengths) & (beams.scores > NEG_INF)).any()):
            beams = self.advance(beams.with_room(), frames, lengths)
            if self.merge_equal:
                beams = self.merge(beams, lengths)
        return self.best(beams)

    def initial_beams(self, batch: int, device: torch.device) -> _Beams:
        """One empty hypothesis (score 0, start symbol) per utterance, the other slots empty."""
        beam = self.beam
        proj, state = self.decoder.start(batch * beam, device)
        zeros = torch.zeros(batch, beam, dtype=torch.long, device=device)
        scores = torch.full((batch, beam), NEG_INF, dtype=torch.float64, device=device)
        scores[:, 0] = 0.0
        buffer = torch.zeros(batch, beam, 8, dtype=torch.long, device=device)
        return _Beams(
            scores=scores,
            time=zeros,
            tokens_at_frame=zeros,
            last_token=torch.full_like(zeros, self.decoder.blank_id),
            lengths=zeros,
            labels=buffer,
            frames=buffer,
            durations=buffer,
            confidences=buffer.double(),
            predictor_proj=proj,
            predictor_state=state,
            scorer_states=initial_scorer_states(self.fusion, (batch, beam), device),
        )

    def candidate_scores(
        self, beams: _Beams, frames: torch.Tensor, finished: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, ScorerStates]:
        """(B, K, C) the score of every candidate: C = V symbols (RNN-T) or V x D (token, duration) pairs (TDT,
        flattened token-major). A finished hypothesis' one candidate, itself, sits in the otherwise unused
        column: RNN-T's blank, TDT's (blank, duration 0). Also (B, K) the confidence of each hypothesis' token
        distribution (zeros without a confidence method) and each fusion scorer's (B, K, V) states after each
        token."""
        batch, beam = beams.scores.shape
        blank, vocab = self.decoder.blank_id, self.decoder.vocab_size
        at = beams.time.clamp(max=frames.shape[1] - 1)  # finished rows read a valid dummy frame
        rows = torch.arange(batch, device=at.device)[:, None].expand(-1, beam)
        logits = self.decoder.joint(frames[rows, at].reshape(batch * beam, -1), beams.predictor_proj).float()
        logits = logits.reshape(batch, beam, -1)
        token_logp = logits[..., :vocab].log_softmax(-1).double()  # (B, K, V)
        duration_logp = None if self.durations is None else logits[..., vocab:].log_softmax(-1).double()  # (B, K, D)
        confidence = (
            torch.zeros_like(beams.scores)
            if self.confidence is None
            else self.confidence.step_confidence(token_logp, duration_logp)
        )
        search_logp = lm_weighted_blank(token_logp, self.blank_weight, blank)
        fused, next_states = fused_token_scores(search_logp, self.fusion, beams.scorer_states, blank)
        if duration_logp is None:
            scores = beams.scores[..., None] + fused
            stay = blank
        else:
            pair = fused[..., :, None] + duration_logp[..., None, :]  # (B, K, V, D)
            zero = int((self.durations == 0).nonzero()[0])
            pair[..., blank, zero] = NEG_INF
            scores = (beams.scores[..., None, None] + pair).reshape(batch, beam, -1)
            stay = blank * len(self.durations) + zero
        scores = torch.where(finished[..., None], NEG_INF, scores)
        scores[..., stay] = torch.where(finished, beams.scores, scores[..., stay])
        return scores, confidence, next_states

    def advance(self, beams: _Beams, frames: torch.Tensor, lengths: torch.Tensor) -> _Beams:
        """One label-synchronous step: every hypothesis' candidates, the `beam` best of each utterance, their
        tokens appended, frame pointers moved and predictors and fusion scorers advanced."""
        finished = (beams.time >= lengths) | (beams.scores == NEG_INF)
        if self.schedule == "lowest_frame":  # the hypotheses past their utterance's lowest frame wait, as finished
            lowest = torch.where(finished, lengths, beams.time).min(1, keepdim=True).values  # (B, 1)
            finished = finished | (beams.time > lowest)
        scores, confidence, next_states = self.candidate_scores(beams, frames, finished)  # (B, K, C), (B, K)
        batch, beam, choices = scores.shape
        top_scores, top_index = scores.reshape(batch, beam * choices).topk(beam, dim=1)  # (B, K)
        source, symbol = top_index // choices, top_index % choices
        new = beams.gather(source)
        if self.durations is None:
            token = symbol
            advance = (token == self.decoder.blank_id).long()
        else:
            durations = self.durations.to(symbol.device)
            token, advance = symbol // len(durations), durations[symbol % len(durations)]
        moving = ~finished.gather(1, source) & (top_scores > NEG_INF)
        emit = moving & (token != self.decoder.blank_id)
        advance = advance * moving
        count = torch.where(advance > 0, 0, new.tokens_at_frame + emit.long())
        capped = emit & (advance == 0) & (count >= self.max_symbols_per_frame)
        advance, count = advance + capped.long(), torch.where(capped, 0, count)

        slot = new.lengths[..., None]  # (B, K, 1) where an emitted token goes
        labels = new.labels.scatter(2, slot, torch.where(emit, token, new.labels.gather(2, slot).squeeze(2))[..., None])
        stamps = new.frames.scatter(
            2, slot, torch.where(emit, new.time, new.frames.gather(2, slot).squeeze(2))[..., None]
        )
        covers = advance - capped.long() if self.durations is not None else torch.ones_like(advance)
        covered = torch.where(emit, covers, new.durations.gather(2, slot).squeeze(2))
        durations_so_far = new.durations.scatter(2, slot, covered[..., None])
        token_confidence = torch.where(emit, confidence.gather(1, source), new.confidences.gather(2, slot).squeeze(2))
        confidences = new.confidences.scatter(2, slot, token_confidence[..., None])
        after = chosen_states(
            tuple(states.gather(1, source[..., None].expand_as(states)) for states in next_states), token
        )
        flat_emit = emit.reshape(-1)
        proj, state = self.decoder.predict(torch.where(emit, token, new.last_token).reshape(-1), new.predictor_state)
        return _Beams(
            scores=top_scores,
            time=new.time + advance,
            tokens_at_frame=count,
            last_token=torch.where(emit, token, new.last_token),
            lengths=new.lengths + emit.long(),
            labels=labels,
            frames=stamps,
            durations=durations_so_far,
            confidences=confidences,
            predictor_proj=torch.where(flat_emit[:, None], proj, new.predictor_proj),
            predictor_state=where_state(flat_emit, state, new.predictor_state),
            scorer_states=where_states(emit, after, new.scorer_states),
        )

    def merge(self, beams: _Beams, lengths: torch.Tensor) -> _Beams:
        """Hypotheses with the same future up to the cap (same tokens and frame pointer, their tokens at that frame
        not compared, as NeMo's recombination; finished: same tokens; and the same fusion scorer states) merged
        into the best of them by log-add, which keeps its own count; the others' slots emptied."""
        valid = beams.scores > NEG_INF
        time = torch.where(beams.time >= lengths, lengths, beams.time)
        same = (beams.labels[:, :, None] == beams.labels[:, None]).all(-1)  # (B, K, K); buffers are 0 past lengths
        same &= beams.lengths[:, :, None] == beams.lengths[:, None]
        same &= time[:, :, None] == time[:, None]
        same &= valid[:, :, None] & valid[:, None]
        for states in beams.scorer_states:
            same &= states[:, :, None] == states[:, None]
        # topk sorted each utterance's survivors best first, so a group's first member is its best
        first = same.long().argmax(-1)  # (B, K)
        keeps = valid & (first == torch.arange(same.shape[1], device=first.device))
        merged = torch.where(same, beams.scores[:, None], NEG_INF).logsumexp(-1)
        return replace(beams, scores=torch.where(keeps, merged, NEG_INF))

    def best(self, beams: _Beams) -> list[Hypothesis]:
        """The best hypothesis of each utterance (by score / (tokens + 1) with `score_norm`, else by score), its
        score with the fusion scorers' final scores, not normalised."""
        final = final_scores(self.fusion, beams.scorer_states, self.lm_final)
        totals = beams.scores if final is None else beams.scores + final  # (B, K); -inf: an empty slot
        ranks = totals / (beams.lengths + 1) if self.score_norm else totals
        index = ranks.argmax(1)  # (B,)
        rows = torch.arange(len(index), device=index.device)
        scores, lengths = totals[rows, index].tolist(), beams.lengths[rows, index].tolist()
        labels, frames = beams.labels[rows, index].tolist(), beams.frames[rows, index].tolist()
        durations, confidences = beams.durations[rows, index].tolist(), beams.confidences[rows, index].tolist()
        return [
            Hypothesis(
                tokens=seq[:n],
                score=score,
                timestamps=stamps[:n],
                durations=covers[:n],
                token_confidence=values[:n] if self.confidence is not None else [],
            )
            for seq, stamps, covers, values, n, score in zip(labels, frames, durations, confidences, lengths, scores)
        ]


def beam_search(
    model: Transducer | DecoderJoint,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    beam: int = 4,
    tokenizer: TokenDecoder | None = None,
    max_symbols_per_frame: int = 10,
    confidence: ConfidenceMethod | None = None,
    fusion: Fusion = (),
    blank_lm_score_mode: str = "lm_weighted_full",
    lm_final: bool = True,
    score_norm: bool = True,
    schedule: str = "label",
    merge: bool = True,
) -> list[Hypothesis]:
    """Batched beam search of RNN-T and TDT models (`BatchedBeamSearch`; the module docstring has the algorithm
    and the score convention). Call ``model.eval()`` first.

    Args:
        model: the transducer, or any `DecoderJoint` (an exported model).
        encoder_out: (B, T, H_e) float encoder frames.
        encoder_lengths: (B,) int64 valid frames per utterance.
        beam: >= 1 hypotheses kept per utterance; 1 is greedy search.
        tokenizer: when given, each hypothesis' `.text` is ``tokenizer.decode(tokens)``.
        max_symbols_per_frame: >= 1 cap on tokens emitted at one frame; the default is greedy search's.
        confidence: when given, each token's confidence by this method (`Hypothesis.token_confidence`).
        fusion: shallow-fusion scorers and their weights (`asr_plugin.decoding.fusion`); empty: none.
        blank_lm_score_mode: "lm_weighted_full" (NeMo's default with an LM) or "no_score" (`BatchedBeamSearch`).
        lm_final: False: the language models' end-of-sentence scores left out of the final choice (NeMo's way).
        score_norm: choose each utterance's result by log-probability / (tokens + 1), as NeMo's ``malsd_batch``
            by default; False: by log-probability. The returned score is never normalised.
        schedule, merge: which hypotheses extend at a step and whether equal ones merge (`BatchedBeamSearch`;
            ``"lowest_frame"`` and ``False`` are sherpa-onnx's NeMo transducer search).
    Returns:
        the best hypothesis of each utterance, in batch order.
    """
    search = BatchedBeamSearch(
        model,
        beam,
        max_symbols_per_frame,
        confidence,
        fusion,
        blank_lm_score_mode,
        lm_final,
        score_norm=score_norm,
        schedule=schedule,
        merge=merge,
    )
    return attach_text(search(encoder_out, encoder_lengths), tokenizer)
