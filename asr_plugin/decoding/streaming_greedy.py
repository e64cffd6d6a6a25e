"""Greedy search of a transducer over encoder frames that arrive in chunks, batched over streams.

One search loop for every lattice (RNN-T and TDT: the lattice's `GreedyStep` says what one joint output means),
label-looping as NeMo's ``greedy_batch``: each stream has a frame pointer t; a step reads the joint at (t, the
predictor state of the last token) and moves t on by the step's advance (RNN-T: blank 1, token 0; TDT: the
duration); after a blank the stream keeps reading with the same predictor state until a token comes or its
frames run out; a token is emitted with timestamp the frame it was read at and the predictor advances on it.
When `max_symbols_per_frame` consecutive tokens share a frame and t is still there, t moves on by one (no blank
is scored).

A chunk ends a stream's loop where its frames end; everything the loop needs next travels in `GreedyState`: the
predictor state and projected output of the last token, the frame pointer (beyond the frames received when a
TDT duration jumped into the next chunk) and the per-frame token count. Each step depends only on frames up to
t, so decoding the frames in chunks of any sizes gives exactly the offline search's tokens, timestamps and
scores, and `asr_plugin.decoding.greedy_search` is this decoder run over one chunk.

With shallow fusion (`asr_plugin.decoding.fusion`: an n-gram LM, phrase boosting) every step chooses by the
joint's token log-probabilities plus the weighted scorer scores; each stream keeps its scorers' states, a token
advances them, a blank keeps them, `reset` starts them afresh, and a hypothesis' score adds the scorers' `final`
score of where it stands (the partial result as if the stream ended there).

Frame indices (timestamps, ``frames_done``, ``segment_start``) count from the stream's first frame; an
endpoint (`reset`) starts a new segment without moving them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import torch

from asr_plugin.decoding.confidence import ConfidenceMethod
from asr_plugin.decoding.fusion import (
    Fusion,
    FusionStep,
    ScorerStates,
    check_fusion,
    chosen_states,
    final_scores,
    initial_scorer_states,
    where_states,
)
from asr_plugin.decoding.greedy_steps import GreedyChoice, greedy_fusion_step, greedy_step
from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder, attach_text
from asr_plugin.decoding.interface import DecoderJoint, PredictorState, decoder_joint, where_state
from asr_plugin.decoding.validation import check_encoder_output, check_int
from asr_plugin.models import Transducer


@dataclass(frozen=True)
class GreedyState:
    """The decoding state of B streams (a value: `StreamingGreedyDecoder.step` returns a new one).

    Attributes:
        predictor_state: the predictor's state after each stream's last token (hypotheses on dim 1).
        predictor_proj: (B, H_j) the joint's projection of the predictor output after the last token.
        last_token: (B,) int64 the last emitted token of the segment (blank before the first).
        time: (B,) int64 the frame each stream reads next; ``time - frames_done`` frames of the next chunk
            are skipped (a TDT duration that jumped past the chunk; 0 for RNN-T).
        frames_done: (B,) int64 frames received so far.
        last_token_frame: (B,) int64 frame of the last token (-1 before any), for `max_symbols_per_frame`.
        tokens_at_frame: (B,) int64 consecutive tokens emitted at ``last_token_frame``.
        segment_start: (B,) int64 frame where the current segment began (0, or where `reset` was called).
        silence_start: (B,) int64 frame where the current run of blanks began: the frame pointer after the
            segment's last token, or ``segment_start``; ``frames_done - silence_start`` frames are trailing
            blanks (`trailing_blank_frames`).
        scores: (B,) float64 log-probability of each segment's hypothesis (with its weighted fusion scores).
        scorer_states: each fusion scorer's (B,) int64 states after each stream's last token (empty without fusion).
        tokens, timestamps, durations, confidences: each stream's emitted token ids, their frames, the frames
            they cover (`Hypothesis.durations`) and their confidence (empty unless the decoder has a
            confidence method), in this segment.
    """

    predictor_state: PredictorState
    predictor_proj: torch.Tensor
    last_token: torch.Tensor
    time: torch.Tensor
    frames_done: torch.Tensor
    last_token_frame: torch.Tensor
    tokens_at_frame: torch.Tensor
    segment_start: torch.Tensor
    silence_start: torch.Tensor
    scores: torch.Tensor
    scorer_states: ScorerStates
    tokens: tuple[tuple[int, ...], ...]
    timestamps: tuple[tuple[int, ...], ...]
    durations: tuple[tuple[int, ...], ...]
    confidences: tuple[tuple[float, ...], ...]

    @property
    def batch_size(self) -> int:
        return len(self.tokens)

    @property
    def frames_to_skip(self) -> torch.Tensor:
        """(B,) int64 frames of the next chunk each stream skips (a TDT duration crossing the boundary)."""
        return self.time - self.frames_done

    def trailing_blank_frames(self) -> torch.Tensor:
        """(B,) int64 frames decoded as blanks since the segment's last token (since its start when it has none).

        RNN-T: the blanks sherpa-onnx counts (``num_trailing_blanks``): the frames after the last token, plus its
        own frame when a blank closed it; TDT: the frames the blanks after the last token cover."""
        return (self.frames_done - self.silence_start).clamp(min=0)

    def has_tokens(self) -> torch.Tensor:
        """(B,) bool, whether each segment has emitted a token."""
        return torch.tensor([len(t) > 0 for t in self.tokens], dtype=torch.bool, device=self.time.device)


@dataclass
class _Search:
    """The loop variables of one chunk's search, (B,) each unless said (updated in place by the named steps).

    Attributes:
        frames: (B * T_chunk, H_j) the chunk's projected frames, stream-major; end: (B,) the global frame after
            each stream's last.
        first_row, last_row, row_offset: (B,) each stream's first and last valid row of ``frames`` (its first
            row for none) and its first row minus its frames received before the chunk: global frame t of
            stream b is row ``t + row_offset[b]``, clamped to the stream's rows. Made once per chunk, so a read
            is an add, a clamp and one ``index_select`` of the flat frames (cheaper than indexing
            (B, T_chunk) with two index tensors).
        time, last_token, last_token_frame, tokens_at_frame, silence_start, scores, scorer_states: as in
            `GreedyState`.
        predictor_proj, predictor_state: the predictor after each stream's last token.
        emitted: per label step, the (B,) tokens found (blank: none), the (B,) frames they were found at, the
            (B,) frames they cover and their (B,) confidence (0 without a confidence method).
    """

    frames: torch.Tensor
    end: torch.Tensor
    first_row: torch.Tensor
    last_row: torch.Tensor
    row_offset: torch.Tensor
    time: torch.Tensor
    last_token: torch.Tensor
    last_token_frame: torch.Tensor
    tokens_at_frame: torch.Tensor
    silence_start: torch.Tensor
    scores: torch.Tensor
    scorer_states: ScorerStates
    predictor_proj: torch.Tensor
    predictor_state: PredictorState
    emitted: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]

    def active(self) -> torch.Tensor:
        """(B,) bool, streams whose frame pointer is still inside the chunk."""
        return self.time < self.end


class StreamingGreedyDecoder:
    """Greedy search of `model` over chunks of encoder frames, batched over B streams (see the module docstring).

    ``decoder.step(frames, lengths, state)`` decodes the next ``lengths[b]`` frames of each stream b (0: the
    stream has no new frames this time); ``decoder.hypotheses(state)`` is each stream's result so far (the
    partial result after a chunk, the final one after its last chunk: greedy search never revises a token, and
    a stream needs no padding or flush at its end). Call ``model.eval()`` first (predictor and joint dropout
    would randomise the result).

    Args:
        model: the transducer, or any `asr_plugin.decoding.DecoderJoint` (`asr_plugin.export.ExportedTransducer`);
            its lattice picks the greedy step.
        max_symbols_per_frame: >= 1, cap on consecutive tokens emitted at one frame.
        confidence: when given, every token's confidence by this method (`Hypothesis.token_confidence`).
        fusion: shallow-fusion scorers and their weights (`asr_plugin.decoding.fusion.WeightedScorer`), every
            stream with its own states; empty: the joint alone.
    """

    def __init__(
        self,
        model: Transducer | DecoderJoint,
        max_symbols_per_frame: int = 10,
        confidence: ConfidenceMethod | None = None,
        fusion: Fusion = (),
    ) -> None:
        check_int("max_symbols_per_frame", max_symbols_per_frame, 1)
        self.decoder = decoder_joint(model)
        self.max_symbols_per_frame = max_symbols_per_frame
        self.confidence = confidence
        self.fusion = check_fusion(fusion, self.decoder.vocab_size, self.decoder.blank_id)
        self.greedy_step = greedy_step(self.decoder)

    @torch.no_grad()
    def start_symbol_output(self, batch_size: int, device: torch.device) -> tuple[torch.Tensor, PredictorState]:
        """The predictor after the start symbol: (N, H_j) projected output, its state."""
        return self.decoder.start(batch_size, device)

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> GreedyState:
        """The state of `batch_size` streams before their first frame, on `device` (the model's)."""
        check_int("batch_size", batch_size, 0)
        device = torch.device(device)
        proj, state = self.start_symbol_output(batch_size, device)
        zeros = torch.zeros(batch_size, dtype=torch.long, device=device)
        return GreedyState(
            predictor_state=state,
            predictor_proj=proj,
            last_token=torch.full_like(zeros, self.decoder.blank_id),
            time=zeros,
            frames_done=zeros,
            last_token_frame=torch.full_like(zeros, -1),
            tokens_at_frame=zeros,
            segment_start=zeros,
            silence_start=zeros,
            scores=torch.zeros(batch_size, dtype=torch.float64, device=device),
            scorer_states=initial_scorer_states(self.fusion, (batch_size,), device),
            tokens=((),) * batch_size,
            timestamps=((),) * batch_size,
            durations=((),) * batch_size,
            confidences=((),) * batch_size,
        )

    @torch.no_grad()
    def step(self, encoder_frames: torch.Tensor, frame_lengths: torch.Tensor, state: GreedyState) -> GreedyState:
        """Decodes the next chunk of every stream: label steps (`find_tokens`, then `emit_tokens`) until every
        stream's frame pointer has left the chunk.

        Args:
            encoder_frames: (B, T_chunk, H_e) float encoder frames, stream b's new frames first.
            frame_lengths: (B,) int64 new frames per stream, in [0, T_chunk].
            state: the state after the previous chunk (`initial_state` before the first); not modified.
        Returns:
            the state after this chunk.
        """
        self.check_chunk(encoder_frames, frame_lengths, state)
        end = state.frames_done + frame_lengths.to(state.time.device)
        if encoder_frames.shape[1] == 0 or state.batch_size == 0:
            return replace(state, frames_done=end)
        search = self.begin_chunk(encoder_frames, end, state)
        while bool(search.active().any()):
            self.emit_tokens(search, *self.find_tokens(search))
        return self.end_chunk(search, state)

    def check_chunk(self, encoder_frames: torch.Tensor, frame_lengths: torch.Tensor, state: GreedyState) -> None:
        """ValueError/TypeError naming the argument unless the chunk fits the state and the model."""
        check_encoder_output(encoder_frames, frame_lengths, ("encoder_frames", "frame_lengths"))
        if encoder_frames.shape[0] != state.batch_size:
            raise ValueError(
                f"encoder_frames has {encoder_frames.shape[0]} streams, the state {state.batch_size} "
                "(decode each batch of streams with its own state)"
            )
        frame_dim = self.decoder.frame_dim
        if frame_dim is not None and encoder_frames.shape[2] != frame_dim:
            raise ValueError(f"encoder_frames has H_e={encoder_frames.shape[2]}, the model's encoder {frame_dim}")

    def begin_chunk(self, encoder_frames: torch.Tensor, end: torch.Tensor, state: GreedyState) -> _Search:
        """The loop variables at the chunk's start: its frames projected once, the state's values."""
        batch, chunk = encoder_frames.shape[:2]
        first_row = torch.arange(batch, device=state.time.device) * chunk
        frames = self.decoder.project_frames(encoder_frames.to(state.time.device))  # (B, T_chunk, H_j)
        return _Search(
            frames=frames.reshape(batch * chunk, frames.shape[2]),
            end=end,
            first_row=first_row,
            last_row=first_row + (end - state.frames_done - 1).clamp(min=0),
            row_offset=first_row - state.frames_done,
            time=state.time,
            last_token=state.last_token,
            last_token_frame=state.last_token_frame,
            tokens_at_frame=state.tokens_at_frame,
            silence_start=state.silence_start,
            scores=state.scores,
            scorer_states=state.scorer_states,
            predictor_proj=state.predictor_proj,
            predictor_state=state.predictor_state,
            emitted=[],
        )

    def read(self, search: _Search, at: torch.Tensor, fusion: FusionStep) -> GreedyChoice:
        """(B,) global frames -> the greedy choice there with the scorers' `fusion` step (rows past their frames
        read a valid dummy frame)."""
        rows = torch.clamp(at + search.row_offset, search.first_row, search.last_row)
        logits = self.decoder.joint(search.frames.index_select(0, rows), search.predictor_proj)
        return self.greedy_step(logits, fusion)

    def find_tokens(
        self, search: _Search
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, ScorerStates]:
        """One label step: every active stream reads at its frame pointer, and after a blank keeps reading the
        frames it lands on (same predictor state) until a token comes or the chunk ends. Moves the frame
        pointers and adds the steps' scores; returns (B,) the token found (blank: none), its frame, the
        frames it covers (RNN-T 1, TDT its duration), its confidence and the fusion scorers' states after it. The
        scorers are advanced once per label step: their states do not change until the token."""
        active = search.active()
        found_at = search.time
        fusion = greedy_fusion_step(self.fusion, search.scorer_states, self.decoder.blank_id)
        token, advance, score, token_logp, duration_logp = self.read(search, search.time, fusion)
        confidence = self.token_confidence(token_logp, duration_logp)
        search.scores = search.scores + torch.where(active, score, 0.0)
        search.time = search.time + advance * active
        looking = active & (token == self.decoder.blank_id) & search.active()
        while bool(looking.any()):
            found_at = torch.where(looking, search.time, found_at)
            more = self.read(search, search.time, fusion)
            token = torch.where(looking, more.token, token)
            if self.confidence is not None:
                more_confidence = self.token_confidence(more.token_logp, more.duration_logp)
                confidence = torch.where(looking, more_confidence, confidence)
            search.scores = search.scores + torch.where(looking, more.score, 0.0)
            advance = torch.where(looking, more.advance, advance)
            search.time = search.time + more.advance * looking
            looking = looking & (token == self.decoder.blank_id) & search.active()
        covers = advance if self.decoder.durations is not None else torch.ones_like(advance)
        token = torch.where(active, token, self.decoder.blank_id)
        return token, found_at, covers, confidence, chosen_states(fusion.next_states, token)

    def token_confidence(self, token_logp: torch.Tensor, duration_logp: torch.Tensor | None) -> torch.Tensor:
        """(B, V) token and (B, D) duration log-probabilities (None: RNN-T) -> (B,) float64 confidence by the
        decoder's method (`ConfidenceMethod.step_confidence`; zeros without one)."""
        if self.confidence is None:
            return torch.zeros(token_logp.shape[0], dtype=torch.float64, device=token_logp.device)
        return self.confidence.step_confidence(
            token_logp.double(), None if duration_logp is None else duration_logp.double()
        )

    def emit_tokens(
        self,
        search: _Search,
        token: torch.Tensor,
        found_at: torch.Tensor,
        covers: torch.Tensor,
        confidence: torch.Tensor,
        scorer_states: ScorerStates,
    ) -> None:
        """Appends the found tokens, advances their streams' predictors and fusion scorers on them (the others
        keep theirs) and moves a frame pointer on by one where `max_symbols_per_frame` tokens came from its
        frame."""
        found = token != self.decoder.blank_id
        search.emitted.append((token, found_at, covers, confidence))
        search.scorer_states = where_states(found, scorer_states, search.scorer_states)
        proj, predictor_state = self.decoder.predict(
            torch.where(found, token, search.last_token), search.predictor_state
        )
        search.predictor_proj = torch.where(found[:, None], proj, search.predictor_proj)
        search.predictor_state = where_state(found, predictor_state, search.predictor_state)
        search.last_token = torch.where(found, token, search.last_token)
        same = found_at == search.last_token_frame
        search.tokens_at_frame = torch.where(
            found, torch.where(same, search.tokens_at_frame + 1, 1), search.tokens_at_frame
        )
        search.last_token_frame = torch.where(found, found_at, search.last_token_frame)
        capped = (
            found & (search.tokens_at_frame >= self.max_symbols_per_frame) & (search.last_token_frame == search.time)
        )
        search.time = search.time + capped.long()
        search.silence_start = torch.where(found, search.time, search.silence_start)

    def end_chunk(self, search: _Search, state: GreedyState) -> GreedyState:
        """The state after the chunk: the loop variables, and the tokens found appended (one host copy)."""
        new_tokens: list[list[int]] = [[] for _ in range(state.batch_size)]
        new_stamps: list[list[int]] = [[] for _ in range(state.batch_size)]
        new_durations: list[list[int]] = [[] for _ in range(state.batch_size)]
        new_confidences: list[list[float]] = [[] for _ in range(state.batch_size)]
        if search.emitted:
            tokens, frames, covers, confidences = (
                torch.stack(parts, dim=1).tolist() for parts in zip(*search.emitted)
            )  # (B, label steps) each
            for b in range(state.batch_size):
                for token, frame, cover, confidence in zip(tokens[b], frames[b], covers[b], confidences[b]):
                    if token != self.decoder.blank_id:
                        new_tokens[b].append(token)
                        new_stamps[b].append(frame)
                        new_durations[b].append(cover)
                        if self.confidence is not None:
                            new_confidences[b].append(confidence)
        return replace(
            state,
            predictor_state=search.predictor_state,
            predictor_proj=search.predictor_proj,
            last_token=search.last_token,
            time=search.time,
            frames_done=search.end,
            last_token_frame=search.last_token_frame,
            tokens_at_frame=search.tokens_at_frame,
            silence_start=search.silence_start,
            scores=search.scores,
            scorer_states=search.scorer_states,
            tokens=_extended(state.tokens, new_tokens),
            timestamps=_extended(state.timestamps, new_stamps),
            durations=_extended(state.durations, new_durations),
            confidences=_extended(state.confidences, new_confidences),
        )

    def hypotheses(self, state: GreedyState, tokenizer: TokenDecoder | None = None) -> list[Hypothesis]:
        """Each stream's hypothesis of its current segment (partial until its last chunk, then final); its score
        adds the fusion scorers' final scores where the stream stands."""
        final = final_scores(self.fusion, state.scorer_states)
        scores = state.scores if final is None else state.scores + final
        return attach_text(
            [
                Hypothesis(
                    tokens=list(tokens),
                    score=score,
                    timestamps=list(stamps),
                    durations=list(durations),
                    token_confidence=list(confidences),
                )
                for tokens, stamps, durations, confidences, score in zip(
                    state.tokens, state.timestamps, state.durations, state.confidences, scores.tolist()
                )
            ],
            tokenizer,
        )

    def reset(self, state: GreedyState, streams: torch.Tensor) -> GreedyState:
        """Starts a new segment for the streams where `streams` ((B,) bool) is True, as sherpa-onnx does at an
        endpoint for NeMo transducers: tokens, timestamps and score emptied, predictor back to the start symbol
        (its state reset, not carried over) and fusion scorers to their start states, frames counted on. The frame pointer is kept, so a TDT duration that
        jumped past the endpoint still skips its frames. Other streams are unchanged."""
        if streams.shape != (state.batch_size,) or streams.dtype != torch.bool:
            raise ValueError(
                f"streams must be a (B,)=({state.batch_size},) bool tensor, got {streams.dtype} {tuple(streams.shape)}"
            )
        streams = streams.to(state.time.device)
        if not bool(streams.any()):
            return state
        proj, start_state = self.start_symbol_output(state.batch_size, state.time.device)
        keep = ~streams
        chosen = streams.tolist()
        return replace(
            state,
            predictor_state=where_state(keep, state.predictor_state, start_state),
            predictor_proj=torch.where(keep[:, None], state.predictor_proj, proj),
            last_token=torch.where(keep, state.last_token, self.decoder.blank_id),
            last_token_frame=torch.where(keep, state.last_token_frame, -1),
            tokens_at_frame=torch.where(keep, state.tokens_at_frame, 0),
            segment_start=torch.where(keep, state.segment_start, state.frames_done),
            silence_start=torch.where(keep, state.silence_start, state.time),
            scores=torch.where(keep, state.scores, 0.0),
            scorer_states=where_states(
                keep, state.scorer_states, initial_scorer_states(self.fusion, (state.batch_size,), state.time.device)
            ),
            tokens=tuple(() if reset else tokens for reset, tokens in zip(chosen, state.tokens)),
            timestamps=tuple(() if reset else stamps for reset, stamps in zip(chosen, state.timestamps)),
            durations=tuple(() if reset else covers for reset, covers in zip(chosen, state.durations)),
            confidences=tuple(() if reset else values for reset, values in zip(chosen, state.confidences)),
        )


def _extended(old: tuple[tuple[int, ...], ...], new: Sequence[list[int]]) -> tuple[tuple[int, ...], ...]:
    """Each stream's sequence with its new items appended (unchanged tuples are shared)."""
    return tuple(seq + tuple(more) if more else seq for seq, more in zip(old, new))
