"""The frames of a front end computed as audio arrives in pieces, batched over streams: what every streaming
extractor shares (`asr_plugin.frontend.online.fbank.StreamingFbank`, `asr_plugin.frontend.online.stft.StreamingStft`).

Each stream keeps the samples from the first one its next frame needs; `StreamingFrames.accept` appends a piece
and gives the frames whose samples have all arrived, `StreamingFrames.flush` ends streams and gives their last
frames (those whose windows reach past the end, computed as the whole-utterance front end computes them there).
A subclass says when a frame is ready (`ready_frames`), which sample its next frame needs first
(`first_sample_needed`) and how frames are computed from the kept samples (`compute_frames`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

import torch
from torch import nn

from asr_plugin.audio.pieces import checked_pieces
from asr_plugin.frontend.online.ragged import append_ragged, checked_lengths, drop_front


@dataclass(frozen=True)
class SampleStreamState:
    """The feature state of B streams (a value: the extractors return new ones).

    Attributes:
        samples: (B, L) float32 each stream's kept samples, left-aligned (a stream holds ``received -
            samples_start`` of them, the rest is padding).
        samples_start: (B,) int64 index (in the stream's audio) of each stream's first kept sample.
        received: (B,) int64 samples received so far.
        frames_done: (B,) int64 frames given out so far.
        finished: (B,) bool, streams whose end was flushed (they take no more audio).
    """

    samples: torch.Tensor
    samples_start: torch.Tensor
    received: torch.Tensor
    frames_done: torch.Tensor
    finished: torch.Tensor

    @property
    def batch_size(self) -> int:
        return self.samples.shape[0]


class StreamingFrames(ABC):
    """Feeds audio pieces of B streams through a front end and gives the frames that became ready (see the module
    docstring). Over a stream's pieces and its flush the frames are those of ``frontend(whole audio)`` (float
    rounding of a batch's FFT apart), whatever the pieces' sizes.

    Args:
        frontend: the built front end (``asr_plugin.data.build_frontend``), with ``num_mel_bins`` and
            ``num_frames``.

    Attributes:
        reach: the samples from hop * m on that frame m needs (its lookahead; a subclass sets it).
    """

    reach: int

    def __init__(self, frontend: nn.Module) -> None:
        self.frontend = frontend

    @property
    def num_mel_bins(self) -> int:
        return self.frontend.num_mel_bins

    @abstractmethod
    def ready_frames(self, received: torch.Tensor) -> torch.Tensor:
        """(B,) samples received -> (B,) int64 frames whose samples have all arrived (before the end is known)."""

    @abstractmethod
    def first_sample_needed(self, frame: torch.Tensor) -> torch.Tensor:
        """(B,) frame indices -> (B,) int64 the first sample a stream must keep to compute them and later frames."""

    @abstractmethod
    def compute_frames(self, state: SampleStreamState, counts: torch.Tensor, width: int) -> torch.Tensor:
        """(B, width, F) frames ``frames_done[b] ...`` of every stream from its kept samples (a stream's rows past
        ``counts[b]`` are masked by the caller); `state.finished` marks the streams whose end is known."""

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> SampleStreamState:
        """The state of `batch_size` streams before any audio."""
        zeros = torch.zeros(batch_size, dtype=torch.long, device=device)
        return SampleStreamState(
            samples=torch.zeros(batch_size, 0, device=device),
            samples_start=zeros,
            received=zeros,
            frames_done=zeros,
            finished=torch.zeros(batch_size, dtype=torch.bool, device=device),
        )

    @torch.no_grad()
    def accept(
        self, audio: torch.Tensor, lengths: torch.Tensor, state: SampleStreamState, sample_rate: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, SampleStreamState]:
        """Appends audio and computes the frames that became ready.

        Args:
            audio: (B, S_piece) float audio in [-1, 1] (or integer PCM), stream b's samples first; checked,
                scaled and resampled by `asr_plugin.audio.pieces.checked_pieces` (NaN refused by stream and sample).
            lengths: (B,) int new samples per stream, in [0, S_piece].
            state: the streams' state; not modified.
            sample_rate: the audio's rate (None: the front end's); another one is resampled.
        Returns:
            (B, T_new, F) float32 new frames (stream b's first ``frames[b]``, the rest 0), (B,) int64 frame counts,
            the new state.
        """
        lengths = checked_lengths(audio, lengths, state.batch_size, state.finished, "audio", 2)
        audio, lengths = checked_pieces(audio, lengths, sample_rate, self.frontend.sample_rate)
        samples, _ = append_ragged(state.samples, state.received - state.samples_start, audio, lengths)
        received = state.received + lengths
        ready = torch.where(state.finished, state.frames_done, self.ready_frames(received).clamp(min=0))
        return self.frames_up_to(ready, replace(state, samples=samples, received=received))

    @torch.no_grad()
    def flush(
        self, state: SampleStreamState, streams: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, SampleStreamState]:
        """Ends the audio of the streams where `streams` ((B,) bool; all by default) is True and computes their
        last frames. Returns what `accept` returns."""
        streams = torch.ones_like(state.finished) if streams is None else streams.to(state.finished.device)
        if streams.shape != state.finished.shape or streams.dtype != torch.bool:
            raise ValueError(
                f"streams must be a (B,)=({state.batch_size},) bool tensor, got {streams.dtype} {tuple(streams.shape)}"
            )
        ending = streams & ~state.finished
        ready = torch.where(ending, self.frontend.num_frames(state.received), state.frames_done)
        return self.frames_up_to(ready, replace(state, finished=state.finished | streams))

    def frames_up_to(
        self, ready: torch.Tensor, state: SampleStreamState
    ) -> tuple[torch.Tensor, torch.Tensor, SampleStreamState]:
        """Frames ``frames_done[b] ... ready[b] - 1`` of every stream; the state keeps the samples from the
        first sample each stream's next frame needs on."""
        counts = (ready - state.frames_done).clamp(min=0)
        width = int(counts.max()) if counts.numel() else 0
        if width:
            features = self.compute_frames(state, counts, width)  # (B, T_new, F)
        else:  # MKL's FFT refuses empty batches
            features = state.samples.new_zeros(state.batch_size, 0, self.num_mel_bins)
        keep = torch.arange(width, device=counts.device)[None, :] < counts[:, None]  # (B, T_new)
        features = features.masked_fill(~keep.unsqueeze(-1), 0.0)
        frames_done = state.frames_done + counts
        first_needed = self.first_sample_needed(frames_done).clamp(min=0)
        drop = (torch.minimum(first_needed, state.received) - state.samples_start).clamp(min=0)
        samples, _ = drop_front(state.samples, state.received - state.samples_start, drop)
        return (
            features,
            counts,
            replace(state, samples=samples, samples_start=state.samples_start + drop, frames_done=frames_done),
        )
