"""Buffered streaming: any full-context (offline) transducer decoded as its features arrive, the baseline that
cache-aware streaming models are compared with (NeMo's chunked RNN-T/TDT inference, ``FrameBatchASR`` and
``BatchedFrameASRRNNT``, and its ``speech_to_text_streaming_infer_rnnt`` with left/chunk/right contexts).

Feature frames are cut into chunks of C frames; chunk k (features [kC, (k+1)C)) is encoded inside a window
that adds up to L frames before it and R after it, ``[max(0, kC - L), min(N, (k+1)C + R))``, by the offline
encoder; of the window's encoder frames, only the chunk's own, global frames [kC/s, (k+1)C/s) (s the encoder's
subsampling), come out, for a `StreamingGreedyDecoder` that carries the hypothesis from chunk to chunk
(`asr_plugin.decoding.recognizer.StreamingRecognizer` runs the two).

The frame bookkeeping is exact: C and L are multiples of s, so every window starts on the subsampled grid and
its frame j is global frame ws/s + j; a chunk is decoded once its right context has arrived, which must hold
enough frames for the subsampling to produce the chunk's last frame (`min_right_context`); at the end of a
stream the last chunk decodes every frame the whole utterance has (``encoder.output_lengths(N)``), so each
encoder frame is decoded exactly once and no audio is dropped. With L and R covering the encoder's receptive
field the frames are those of the offline forward (a Conformer's attention sees the whole window, so only a
window of the whole utterance gives its exact frames; shorter contexts are the approximation this baseline
measures).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from asr_plugin.decoding.validation import check_int
from asr_plugin.frontend.online.feature_buffer import FeatureBuffer
from asr_plugin.models import Transducer

WindowNormalizer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (B, W, F), (B,) -> (B, W, F)
LONG_INPUT = 1 << 14  # feature frames, a multiple of any subsampling factor


def subsampling_factor(model: Transducer) -> int:
    """Feature frames per encoder frame, from ``model.encoder.output_lengths`` (any convolutional subsampling:
    shifting an input by s * n frames shifts its output by n)."""
    lengths = model.encoder.output_lengths(torch.tensor([LONG_INPUT, 2 * LONG_INPUT]))
    frames = int(lengths[1] - lengths[0])
    if frames < 1 or LONG_INPUT % frames:
        raise ValueError(f"the encoder's output_lengths gives no whole subsampling factor ({LONG_INPUT} -> {frames})")
    return LONG_INPUT // frames


def window_chunk_ends(chunk_frames: int, left_frames: int) -> list[int]:
    """Where a chunk ends inside its window (feature frames from the window's start), for every chunk of a
    stream: (k + 1) C while kC < L (the window starts at 0), then L + C."""
    ends = {left_frames + chunk_frames}
    k = 0
    while k * chunk_frames < left_frames:
        ends.add((k + 1) * chunk_frames)
        k += 1
    return sorted(ends)


def min_right_context(model: Transducer, chunk_frames: int, left_frames: int) -> int:
    """The fewest right-context feature frames with which the window of every chunk holds the chunk's last encoder
    frame (the subsampling needs a few frames after a chunk unless it is padded or causal)."""
    factor = subsampling_factor(model)
    ends = torch.tensor(window_chunk_ends(chunk_frames, left_frames))
    for right in range(8 * factor + 1):
        if bool((model.encoder.output_lengths(ends + right) >= ends // factor).all()):
            return right
    raise ValueError(f"no right context up to {8 * factor} frames lets the encoder give a chunk's frames")


@dataclass(frozen=True)
class BufferedState:
    """The state of B streams (a value: `BufferedEncoder` returns new ones).

    Attributes:
        buffer: each stream's feature frames from the first its next window needs.
        chunks_done: (B,) int64 chunks encoded so far.
    """

    buffer: FeatureBuffer
    chunks_done: torch.Tensor


class BufferedEncoder:
    """The encoder stream of buffered streaming (see the module docstring): feature frames in (`append`, `end`),
    each chunk's encoder frames out (`step`), for any offline model.

    Args:
        model: the transducer, in eval mode (its encoder needs ``output_lengths``).
        chunk_frames: C, feature frames per chunk: a positive multiple of the subsampling factor.
        left_frames: L, feature frames of left context: a multiple of the subsampling factor (0 allowed).
        right_frames: R, feature frames of right context (lookahead: the latency beyond the chunk), at least
            `min_right_context`.
        normalize_window: applied to each window's (B, W, F) features and (B,) lengths before the encoder: a
            per-utterance normalisation, which cannot see the whole utterance, run per window as NeMo's buffered
            inference runs its preprocessor per buffer; None: the features are used as given.
    """

    def __init__(
        self,
        model: Transducer,
        chunk_frames: int,
        left_frames: int,
        right_frames: int,
        normalize_window: WindowNormalizer | None = None,
    ) -> None:
        for name, value in (
            ("chunk_frames", chunk_frames),
            ("left_frames", left_frames),
            ("right_frames", right_frames),
        ):
            check_int(name, value, 0, "feature frames")
        factor = subsampling_factor(model)
        if chunk_frames < factor or chunk_frames % factor:
            raise ValueError(
                f"chunk_frames={chunk_frames} must be a positive multiple of the encoder's subsampling factor {factor} "
                "(a chunk holds whole encoder frames)"
            )
        if left_frames % factor:
            raise ValueError(
                f"left_frames={left_frames} must be a multiple of the subsampling factor {factor} (so that every "
                "window starts on the encoder's frame grid)"
            )
        needed = min_right_context(model, chunk_frames, left_frames)
        if right_frames < needed:
            raise ValueError(
                f"right_frames={right_frames} is shorter than the subsampling needs: this encoder gives a chunk's "
                f"last frame only with right_frames >= {needed}"
            )
        self.model = model
        self.factor = factor
        self.chunk_frames, self.left_frames, self.right_frames = chunk_frames, left_frames, right_frames
        self.normalize_window = normalize_window

    def initial_state(self, batch_size: int, feature_dim: int, device: torch.device | str = "cpu") -> BufferedState:
        """The state of `batch_size` streams of `feature_dim`-bin features before any frame."""
        return BufferedState(
            FeatureBuffer.empty(batch_size, feature_dim, device),
            torch.zeros(batch_size, dtype=torch.long, device=device),
        )

    def append(self, features: torch.Tensor, lengths: torch.Tensor, state: BufferedState) -> BufferedState:
        """With stream b's first ``lengths[b]`` frames of (B, T, F) `features` appended."""
        return replace(state, buffer=state.buffer.appended(features, lengths))

    def end(self, state: BufferedState, streams: torch.Tensor) -> BufferedState:
        """With the streams where `streams` ((B,) bool) is True ended: their last chunk reaches their last frame."""
        return replace(state, buffer=state.buffer.ended(streams))

    def reset(self, state: BufferedState, streams: torch.Tensor) -> BufferedState:
        """An endpoint changes nothing here: the windows go on over it (the decoder starts a new segment)."""
        return state

    @torch.no_grad()
    def step(self, state: BufferedState) -> tuple[torch.Tensor, torch.Tensor, BufferedState] | None:
        """Encodes the next chunk of every stream whose right context has arrived (or that has ended with frames
        left): (B, C / s, H_e) encoder frames, stream b's first ``counts[b]`` its chunk's, (B,) int64 counts, the
        new state; None when no stream has a chunk to encode."""
        buffer, per_chunk = state.buffer, self.chunk_frames // self.factor
        chunk_start = state.chunks_done * self.chunk_frames  # (B,) feature frames
        first = state.chunks_done * per_chunk  # (B,) the chunk's first encoder frame
        total = self.model.encoder.output_lengths(buffer.received).clamp(min=0)  # (B,) frames of an ended stream
        ready = torch.where(
            buffer.finished, first < total, chunk_start + self.chunk_frames + self.right_frames <= buffer.received
        )
        if not bool(ready.any()):
            return None
        count = torch.where(buffer.finished, (total - first).clamp(0, per_chunk), per_chunk)
        count = torch.where(ready, count, 0)
        window_start = (chunk_start - self.left_frames).clamp(min=0)
        window_end = torch.minimum(chunk_start + self.chunk_frames + self.right_frames, buffer.received)
        rows = ready.nonzero().squeeze(1)  # (B',) the streams that encode a window
        width = (window_end - window_start)[rows]  # (B',)
        windows = buffer.frames(window_start, torch.where(ready, window_end - window_start, 0))[rows]  # (B', W, F)
        if self.normalize_window is not None:
            windows = self.normalize_window(windows, width)
        encoded, encoded_lengths = self.model.encode(windows, width)  # (B', T', H_e)
        offset = (chunk_start - window_start)[rows] // self.factor  # (B',) the chunk's first frame in its window
        if bool((encoded_lengths < offset + count[rows]).any()):
            raise ValueError(
                "the encoder gave fewer frames than the chunk needs: its windows need more right context "
                f"(right_frames={self.right_frames})"
            )
        take = (offset[:, None] + torch.arange(per_chunk, device=rows.device)).clamp(max=encoded.shape[1] - 1)
        frames = encoded.new_zeros(buffer.batch_size, per_chunk, encoded.shape[2])  # (B, C / s, H_e)
        frames[rows] = torch.gather(encoded, 1, take[..., None].expand(-1, -1, encoded.shape[2]))
        chunks_done = state.chunks_done + ready.long()
        # keep the features from the start of each stream's next window
        buffer = buffer.dropped_before((chunks_done * self.chunk_frames - self.left_frames).clamp(min=0))
        return frames, count, BufferedState(buffer, chunks_done)
