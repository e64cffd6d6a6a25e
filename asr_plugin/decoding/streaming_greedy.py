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

Frame indices (timestamps, ``frames_done``, ``segment_start``) count from the stream's first frame; an
endpoint (`reset`) starts a new segment without moving them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import torch

from asr_plugin.decoding.greedy_steps import greedy_step
from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder, attach_text
from asr_plugin.decoding.validation import check_encoder_output, check_int
from asr_plugin.models import Transducer
from asr_plugin.models.predictor import LSTMState


@dataclass(frozen=True)
class GreedyState:
    """The decoding state of B streams (a value: `StreamingGreedyDecoder.step` returns a new one).

    Attributes:
        predictor_state: the predictor's state after each stream's last token, (L, B, H_p) each.
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
        scores: (B,) float64 log-probability of each segment's hypothesis.
        tokens, timestamps: each stream's emitted token ids and their frames, in this segment.
    """

    predictor_state: LSTMState
    predictor_proj: torch.Tensor
    last_token: torch.Tensor
    time: torch.Tensor
    frames_done: torch.Tensor
    last_token_frame: torch.Tensor
    tokens_at_frame: torch.Tensor
    segment_start: torch.Tensor
    silence_start: torch.Tensor
    scores: torch.Tensor
    tokens: tuple[tuple[int, ...], ...]
    timestamps: tuple[tuple[int, ...], ...]

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


class StreamingGreedyDecoder:
    """Greedy search of `model` over chunks of encoder frames, batched over B streams (see the module docstring).

    ``decoder.step(frames, lengths, state)`` decodes the next ``lengths[b]`` frames of each stream b (0: the
    stream has no new frames this time); ``decoder.hypotheses(state)`` is each stream's result so far (the
    partial result after a chunk, the final one after its last chunk: greedy search never revises a token, and
    a stream needs no padding or flush at its end). Call ``model.eval()`` first (predictor and joint dropout
    would randomise the result).

    Args:
        model: the transducer, or anything with its decoding interface (``predictor``, ``joint``, ``blank_id``,
            ``vocab_size``, ``lattice``: `asr_plugin.export.ExportedTransducer`); its lattice picks the greedy step.
        max_symbols_per_frame: >= 1, cap on consecutive tokens emitted at one frame.
    """

    def __init__(self, model: Transducer, max_symbols_per_frame: int = 10) -> None:
        check_int("max_symbols_per_frame", max_symbols_per_frame, 1)
        self.model = model
        self.max_symbols_per_frame = max_symbols_per_frame
        self.greedy_step = greedy_step(model)

    @torch.no_grad()
    def start_symbol_output(self, batch_size: int, device: torch.device) -> tuple[torch.Tensor, LSTMState]:
        """The predictor after the start symbol: (N, H_j) projected output, its state ((L, N, H_p) each)."""
        predictor, blank = self.model.predictor, self.model.blank_id
        start = torch.full((batch_size,), blank, dtype=torch.long, device=device)
        out, state = predictor.step(start)
        return self.model.joint.project_predictor(out), state

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> GreedyState:
        """The state of `batch_size` streams before their first frame, on `device` (the model's)."""
        check_int("batch_size", batch_size, 0)
        device = torch.device(device)
        proj, state = self.start_symbol_output(batch_size, device)
        zeros = torch.zeros(batch_size, dtype=torch.long, device=device)
        return GreedyState(
            predictor_state=state,
            predictor_proj=proj,
            last_token=torch.full_like(zeros, self.model.blank_id),
            time=zeros,
            frames_done=zeros,
            last_token_frame=torch.full_like(zeros, -1),
            tokens_at_frame=zeros,
            segment_start=zeros,
            silence_start=zeros,
            scores=torch.zeros(batch_size, dtype=torch.float64, device=device),
            tokens=((),) * batch_size,
            timestamps=((),) * batch_size,
        )

    @torch.no_grad()
    def step(self, encoder_frames: torch.Tensor, frame_lengths: torch.Tensor, state: GreedyState) -> GreedyState:
        """Decodes the next chunk of every stream.

        Args:
            encoder_frames: (B, T_chunk, H_e) float encoder frames, stream b's new frames first.
            frame_lengths: (B,) int64 new frames per stream, in [0, T_chunk].
            state: the state after the previous chunk (`initial_state` before the first); not modified.
        Returns:
            the state after this chunk.
        """
        check_encoder_output(encoder_frames, frame_lengths, ("encoder_frames", "frame_lengths"))
        if encoder_frames.shape[0] != state.batch_size:
            raise ValueError(
                f"encoder_frames has {encoder_frames.shape[0]} streams, the state {state.batch_size} "
                "(decode each batch of streams with its own state)"
            )
        encoder_dim = getattr(getattr(self.model, "encoder", None), "output_dim", None)  # exported models have none
        if encoder_dim is not None and encoder_frames.shape[2] != encoder_dim:
            raise ValueError(f"encoder_frames has H_e={encoder_frames.shape[2]}, the model's encoder {encoder_dim}")
        predictor, joint, blank = self.model.predictor, self.model.joint, self.model.blank_id
        device = state.time.device
        batch_size, chunk_frames, _ = encoder_frames.shape
        lengths = frame_lengths.to(device)
        start, end = state.frames_done, state.frames_done + lengths  # (B,) each: this chunk's frames [start, end)
        if chunk_frames == 0 or batch_size == 0:
            return replace(state, frames_done=end)

        enc_proj = joint.project_encoder(encoder_frames.to(device))  # (B, T_chunk, H_j)
        last_local = (lengths - 1).clamp(min=0)
        rows = torch.arange(batch_size, device=device)
        pred_proj = state.predictor_proj.clone()
        h, c = state.predictor_state[0].clone(), state.predictor_state[1].clone()
        time, scores, last_token = state.time, state.scores, state.last_token
        last_token_frame, tokens_at_frame, silence_start = (
            state.last_token_frame,
            state.tokens_at_frame,
            state.silence_start,
        )
        new_tokens: list[list[int]] = [[] for _ in range(batch_size)]
        new_stamps: list[list[int]] = [[] for _ in range(batch_size)]

        def read(at: torch.Tensor):
            """(B,) global frames -> the greedy choice at them (rows past their frames read a valid dummy)."""
            local = torch.minimum((at - start).clamp(min=0), last_local)
            return self.greedy_step(joint.combine(enc_proj[rows, local], pred_proj))

        active = time < end
        while bool(active.any()):
            found_at = time
            token, advance, score = read(time)
            scores = scores + torch.where(active, score, 0.0)
            time = time + advance * active
            looking = active & (token == blank) & (time < end)
            while bool(looking.any()):  # after a blank: same predictor state, the frame it landed on
                found_at = torch.where(looking, time, found_at)
                more_token, more_advance, more_score = read(time)
                token = torch.where(looking, more_token, token)
                scores = scores + torch.where(looking, more_score, 0.0)
                time = torch.where(looking, time + more_advance, time)
                looking = looking & (token == blank) & (time < end)
            found = active & (token != blank)
            emitting = found.nonzero().squeeze(1)  # (K,)
            if emitting.numel():
                for index, value, frame in zip(
                    emitting.tolist(), token[emitting].tolist(), found_at[emitting].tolist()
                ):
                    new_tokens[index].append(value)
                    new_stamps[index].append(frame)
                out, (new_h, new_c) = predictor.step(token[emitting], (h[:, emitting], c[:, emitting]))
                pred_proj[emitting] = joint.project_predictor(out)
                h[:, emitting], c[:, emitting] = new_h, new_c
                last_token = torch.where(found, token, last_token)
                same = found_at == last_token_frame
                tokens_at_frame = torch.where(found, torch.where(same, tokens_at_frame + 1, 1), tokens_at_frame)
                last_token_frame = torch.where(found, found_at, last_token_frame)
                capped = found & (tokens_at_frame >= self.max_symbols_per_frame) & (last_token_frame == time)
                time = time + capped.long()
                silence_start = torch.where(found, time, silence_start)
            active = time < end

        return replace(
            state,
            predictor_state=(h, c),
            predictor_proj=pred_proj,
            last_token=last_token,
            time=time,
            frames_done=end,
            last_token_frame=last_token_frame,
            tokens_at_frame=tokens_at_frame,
            silence_start=silence_start,
            scores=scores,
            tokens=_extended(state.tokens, new_tokens),
            timestamps=_extended(state.timestamps, new_stamps),
        )

    def hypotheses(self, state: GreedyState, tokenizer: TokenDecoder | None = None) -> list[Hypothesis]:
        """Each stream's hypothesis of its current segment (partial until its last chunk, then final)."""
        return attach_text(
            [
                Hypothesis(tokens=list(tokens), score=score, timestamps=list(stamps))
                for tokens, stamps, score in zip(state.tokens, state.timestamps, state.scores.tolist())
            ],
            tokenizer,
        )

    def reset(self, state: GreedyState, streams: torch.Tensor) -> GreedyState:
        """Starts a new segment for the streams where `streams` ((B,) bool) is True, as sherpa-onnx does at an
        endpoint for NeMo transducers: tokens, timestamps and score emptied, predictor back to the start symbol
        (its state reset, not carried over), frames counted on. The frame pointer is kept, so a TDT duration that
        jumped past the endpoint still skips its frames. Other streams are unchanged."""
        if streams.shape != (state.batch_size,) or streams.dtype != torch.bool:
            raise ValueError(
                f"streams must be a (B,)=({state.batch_size},) bool tensor, got {streams.dtype} {tuple(streams.shape)}"
            )
        streams = streams.to(state.time.device)
        if not bool(streams.any()):
            return state
        proj, (h0, c0) = self.start_symbol_output(state.batch_size, state.time.device)
        keep = ~streams
        chosen = streams.tolist()
        return replace(
            state,
            predictor_state=(
                torch.where(keep[None, :, None], state.predictor_state[0], h0),
                torch.where(keep[None, :, None], state.predictor_state[1], c0),
            ),
            predictor_proj=torch.where(keep[:, None], state.predictor_proj, proj),
            last_token=torch.where(keep, state.last_token, self.model.blank_id),
            last_token_frame=torch.where(keep, state.last_token_frame, -1),
            tokens_at_frame=torch.where(keep, state.tokens_at_frame, 0),
            segment_start=torch.where(keep, state.segment_start, state.frames_done),
            silence_start=torch.where(keep, state.silence_start, state.time),
            scores=torch.where(keep, state.scores, 0.0),
            tokens=tuple(() if reset else tokens for reset, tokens in zip(chosen, state.tokens)),
            timestamps=tuple(() if reset else stamps for reset, stamps in zip(chosen, state.timestamps)),
        )


def _extended(old: tuple[tuple[int, ...], ...], new: Sequence[list[int]]) -> tuple[tuple[int, ...], ...]:
    """Each stream's sequence with its new items appended (unchanged tuples are shared)."""
    return tuple(seq + tuple(more) if more else seq for seq, more in zip(old, new))
