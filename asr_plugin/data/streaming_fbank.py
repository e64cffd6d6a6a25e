"""Kaldi-style filterbank features of audio that arrives in pieces, batched over streams: exactly the frames the
whole-utterance front end computes, each as soon as its samples are there.

Frame m of a `SherpaFbank`-type front end covers samples 160 m - 120 ... 160 m + 279 (samples before 0 reflected
into the audio), so it is ready once 160 m + 280 samples have arrived, as kaldi-native-fbank's ``OnlineFbank``
decides (``NumFrames(..., flush=false)``); `StreamingFbank.flush` then gives the last frames, whose windows reach
past the end and reflect it ((S + 80) // 160 frames in all). Each stream keeps the samples from the first sample
of its next frame on (the history a frame needs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from asr_plugin.data.features import SHERPA_HOP_LENGTH, SHERPA_WIN_LENGTH, SherpaFbank
from asr_plugin.models.ragged import append_ragged, checked_lengths, drop_front

# the first sample of frame m is HOP * m - FRAME_LEAD; it is complete once HOP * m + FRAME_REACH samples arrived
FRAME_LEAD = SHERPA_WIN_LENGTH // 2 - SHERPA_HOP_LENGTH // 2  # 120
FRAME_REACH = SHERPA_WIN_LENGTH - FRAME_LEAD  # 280


@dataclass(frozen=True)
class FbankStreamState:
    """The feature state of B streams (a value: `StreamingFbank` returns new ones).

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


class StreamingFbank:
    """Feeds audio pieces of B streams through a kaldi-style front end (`SherpaOnlineFbank`, or `SherpaFbank`
    without normalisation) and gives the frames that became ready.

    ``accept(audio, lengths, state)`` appends ``lengths[b]`` samples to stream b (0: none this time) and returns
    the new frames; ``flush(state, streams)`` ends the chosen streams and returns their last frames. Over a
    stream's pieces and its flush the frames are those of ``frontend(whole audio)`` (float rounding of a batch's
    FFT apart), whatever the pieces' sizes. No dither (evaluation mode's features).

    Args:
        frontend: the front end whose frames to compute; a per-utterance normalisation cannot stream and is
            refused.
    """

    def __init__(self, frontend: SherpaFbank) -> None:
        if not isinstance(frontend, SherpaFbank):
            raise TypeError(
                f"StreamingFbank computes kaldi-style frames of a SherpaFbank/SherpaOnlineFbank front end (kinds "
                f"'sherpa_online', 'sherpa'), not {type(frontend).__name__}"
            )
        if frontend.normalize is not None:
            raise ValueError(
                f"front end normalize={frontend.normalize!r} standardises each bin over the whole utterance, "
                "which cannot be computed as audio arrives; use kind 'sherpa_online' (or 'sherpa' with normalize None)"
            )
        self.frontend = frontend

    @property
    def num_mel_bins(self) -> int:
        return self.frontend.num_mel_bins

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> FbankStreamState:
        """The state of `batch_size` streams before any audio."""
        zeros = torch.zeros(batch_size, dtype=torch.long, device=device)
        return FbankStreamState(
            samples=torch.zeros(batch_size, 0, device=device),
            samples_start=zeros,
            received=zeros,
            frames_done=zeros,
            finished=torch.zeros(batch_size, dtype=torch.bool, device=device),
        )

    @torch.no_grad()
    def accept(
        self, audio: torch.Tensor, lengths: torch.Tensor, state: FbankStreamState
    ) -> tuple[torch.Tensor, torch.Tensor, FbankStreamState]:
        """Appends audio and computes the frames that became ready.

        Args:
            audio: (B, S_piece) float audio in [-1, 1] at the front end's rate, stream b's samples first.
            lengths: (B,) int new samples per stream, in [0, S_piece].
            state: the streams' state; not modified.
        Returns:
            (B, T_new, F) float32 new frames (stream b's first ``frames[b]``, the rest 0), (B,) int64 frame counts,
            the new state.
        """
        lengths = checked_lengths(audio, lengths, state.batch_size, state.finished, "audio", 2)
        samples, _ = append_ragged(state.samples, state.received - state.samples_start, audio.float(), lengths)
        received = state.received + lengths
        # frames whose last sample has arrived (kaldi-native-fbank's NumFrames without flush)
        ready = torch.div(received - FRAME_REACH, SHERPA_HOP_LENGTH, rounding_mode="floor") + 1
        ready = torch.where(state.finished, state.frames_done, ready.clamp(min=0))
        return self.frames_up_to(ready, replace(state, samples=samples, received=received))

    @torch.no_grad()
    def flush(
        self, state: FbankStreamState, streams: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, FbankStreamState]:
        """Ends the audio of the streams where `streams` ((B,) bool; all by default) is True and computes their
        last frames (the utterance's end reflected). Returns what `accept` returns."""
        streams = torch.ones_like(state.finished) if streams is None else streams.to(state.finished.device)
        if streams.shape != state.finished.shape or streams.dtype != torch.bool:
            raise ValueError(
                f"streams must be a (B,)=({state.batch_size},) bool tensor, got {streams.dtype} {tuple(streams.shape)}"
            )
        ending = streams & ~state.finished
        ready = torch.where(ending, self.frontend.num_frames(state.received), state.frames_done)
        return self.frames_up_to(ready, replace(state, finished=state.finished | streams))

    def frames_up_to(
        self, ready: torch.Tensor, state: FbankStreamState
    ) -> tuple[torch.Tensor, torch.Tensor, FbankStreamState]:
        """Frames ``frames_done[b] ... ready[b] - 1`` of every stream; the state keeps the samples from the
        first sample of each stream's next frame on."""
        counts = (ready - state.frames_done).clamp(min=0)
        width = int(counts.max()) if counts.numel() else 0
        if width:
            windows = self.frontend.frame_windows(
                state.samples, state.samples_start, state.frames_done, width, state.received
            )  # (B, T_new, W)
            features = self.frontend.log_fbank(windows)  # (B, T_new, F)
        else:  # MKL's FFT refuses empty batches
            features = state.samples.new_zeros(state.batch_size, 0, self.num_mel_bins)
        keep = torch.arange(width, device=counts.device)[None, :] < counts[:, None]  # (B, T_new)
        features = features.masked_fill(~keep.unsqueeze(-1), 0.0)
        frames_done = state.frames_done + counts
        first_needed = (frames_done * SHERPA_HOP_LENGTH - FRAME_LEAD).clamp(min=0)
        drop = (torch.minimum(first_needed, state.received) - state.samples_start).clamp(min=0)
        samples, _ = drop_front(state.samples, state.received - state.samples_start, drop)
        return (
            features,
            counts,
            replace(state, samples=samples, samples_start=state.samples_start + drop, frames_done=frames_done),
        )
