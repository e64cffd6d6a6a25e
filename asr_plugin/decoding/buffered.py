"""Buffered streaming: any full-context (offline) transducer decoded as its features arrive, the baseline that
cache-aware streaming models are compared with (NeMo's chunked RNN-T/TDT inference, ``FrameBatchASR`` and
``BatchedFrameASRRNNT``, and its ``speech_to_text_streaming_infer_rnnt`` with left/chunk/right contexts).

Feature frames are cut into chunks of C frames; chunk k (features [kC, (k+1)C)) is encoded inside a window
that adds up to L frames before it and R after it, ``[max(0, kC - L), min(N, (k+1)C + R))``, by the offline
encoder; of the window's encoder frames, only the chunk's own, global frames [kC/s, (k+1)C/s) (s the encoder's
subsampling), go to a `StreamingGreedyDecoder`, which carries the hypothesis from chunk to chunk.

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

from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder
from asr_plugin.decoding.streaming_greedy import GreedyState, StreamingGreedyDecoder
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
    """The state of B streams (a value: `BufferedStreaming` returns new ones).

    Attributes:
        features: (B, K, F) each stream's kept feature frames (from the first its next window needs), left-aligned.
        features_start: (B,) int64 index of each stream's first kept frame.
        received: (B,) int64 feature frames received so far.
        chunks_done: (B,) int64 chunks decoded so far.
        finished: (B,) bool, streams whose end was flushed.
        decoder: the greedy decoder's state (its hypotheses; ``frames_done``: encoder frames decoded).
    """

    features: torch.Tensor
    features_start: torch.Tensor
    received: torch.Tensor
    chunks_done: torch.Tensor
    finished: torch.Tensor
    decoder: GreedyState

    @property
    def batch_size(self) -> int:
        return self.features.shape[0]


class BufferedStreaming:
    """Buffered streaming of an offline transducer over B streams of feature frames (see the module docstring).

    ``accept(features, lengths, state)`` appends ``lengths[b]`` frames to stream b and decodes every chunk whose
    right context is now complete; ``flush(state, streams)`` ends the chosen streams and decodes what is left;
    ``hypotheses(state)`` is each stream's (partial, then final) result.

    Args:
        model: the transducer, in eval mode (its encoder needs ``output_lengths``).
        chunk_frames: C, feature frames decoded per chunk: a positive multiple of the subsampling factor.
        left_frames: L, feature frames of left context: a multiple of the subsampling factor (0 allowed).
        right_frames: R, feature frames of right context (lookahead: the latency beyond the chunk), at least
            `min_right_context`.
        max_symbols_per_frame: the greedy search's cap.
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
        max_symbols_per_frame: int = 4,
        normalize_window: WindowNormalizer | None = None,
    ) -> None:
        for name, value in (
            ("chunk_frames", chunk_frames),
            ("left_frames", left_frames),
            ("right_frames", right_frames),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} must be an int >= 0 (feature frames)")
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
        self.decoder = StreamingGreedyDecoder(model, max_symbols_per_frame)
        self.normalize_window = normalize_window

    def initial_state(self, batch_size: int, feature_dim: int, device: torch.device | str = "cpu") -> BufferedState:
        """The state of `batch_size` streams of `feature_dim`-bin features before any frame."""
        zeros = torch.zeros(batch_size, dtype=torch.long, device=device)
        return BufferedState(
            features=torch.zeros(batch_size, 0, feature_dim, device=device),
            features_start=zeros,
            received=zeros,
            chunks_done=zeros,
            finished=torch.zeros(batch_size, dtype=torch.bool, device=device),
            decoder=self.decoder.initial_state(batch_size, device),
        )

    @torch.no_grad()
    def accept(self, features: torch.Tensor, lengths: torch.Tensor, state: BufferedState) -> BufferedState:
        """Appends (B, T, F) feature frames (stream b's first ``lengths[b]``; (B,) ints, 0: none this time) and
        decodes every chunk whose right context has arrived. `state` is not modified."""
        if features.ndim != 3 or lengths.shape != features.shape[:1] or lengths.is_floating_point():
            raise ValueError(
                f"features must be (B, T, F) with integer lengths (B,), got {tuple(features.shape)} and "
                f"{lengths.dtype} {tuple(lengths.shape)}"
            )
        if features.shape[0] != state.batch_size:
            raise ValueError(
                f"features has {features.shape[0]} streams, the state {state.batch_size} "
                "(each batch of streams has its own state)"
            )
        if features.shape[2] != state.features.shape[2]:
            raise ValueError(f"features have F={features.shape[2]} bins, the state {state.features.shape[2]}")
        lengths = lengths.to(state.received.device).long()
        if bool(((lengths < 0) | (lengths > features.shape[1])).any()):
            raise ValueError(f"lengths must lie in [0, T={features.shape[1]}], got {lengths.tolist()}")
        late = state.finished & (lengths > 0)
        if bool(late.any()):
            raise ValueError(f"stream {int(late.nonzero()[0])} was flushed: it takes no more features")
        held = state.received - state.features_start
        kept = [torch.cat([state.features[b, : held[b]], features[b, : lengths[b]]]) for b in range(state.batch_size)]
        if kept:
            state = replace(
                state,
                features=torch.nn.utils.rnn.pad_sequence(kept, batch_first=True),
                received=state.received + lengths,
            )
        while True:
            chunk_end = (state.chunks_done + 1) * self.chunk_frames
            ready = ~state.finished & (chunk_end + self.right_frames <= state.received)
            if not bool(ready.any()):
                return state
            state = self.decode_chunks(state, ready, last_frame=None)

    @torch.no_grad()
    def flush(self, state: BufferedState, streams: torch.Tensor | None = None) -> BufferedState:
        """Ends the streams where `streams` ((B,) bool; all by default) is True and decodes their remaining
        chunks, the last one up to the utterance's last encoder frame."""
        streams = torch.ones_like(state.finished) if streams is None else streams.to(state.finished.device)
        if streams.shape != state.finished.shape or streams.dtype != torch.bool:
            raise ValueError(
                f"streams must be a (B,)=({state.batch_size},) bool tensor, got {streams.dtype} {tuple(streams.shape)}"
            )
        ending = streams & ~state.finished
        total = self.model.encoder.output_lengths(state.received).clamp(min=0)  # (B,) encoder frames of each stream
        while True:
            ready = ending & (state.chunks_done * (self.chunk_frames // self.factor) < total)
            if not bool(ready.any()):
                return replace(state, finished=state.finished | streams)
            state = self.decode_chunks(state, ready, last_frame=torch.where(ending, total, 0))

    def hypotheses(self, state: BufferedState, tokenizer: TokenDecoder | None = None) -> list[Hypothesis]:
        """Each stream's hypothesis so far (final after its flush)."""
        return self.decoder.hypotheses(state.decoder, tokenizer)

    def decode_chunks(
        self, state: BufferedState, ready: torch.Tensor, last_frame: torch.Tensor | None
    ) -> BufferedState:
        """Encodes the window of the next chunk of each `ready` stream and decodes the chunk's frames: C / s of
        them, or with `last_frame` ((B,) encoder frames of the ended streams) those up to it; the window ends at
        the chunk's right context, or at the stream's end when it ended."""
        per_chunk = self.chunk_frames // self.factor
        chunk_start = state.chunks_done * self.chunk_frames  # (B,) feature frames
        window_start = (chunk_start - self.left_frames).clamp(min=0)
        window_end = torch.minimum(chunk_start + self.chunk_frames + self.right_frames, state.received)
        if last_frame is not None:
            window_end = state.received
        first = state.chunks_done * per_chunk  # (B,) global encoder frame of the chunk's first frame
        count = torch.full_like(first, per_chunk) if last_frame is None else (last_frame - first).clamp(0, per_chunk)
        count = torch.where(ready, count, 0)
        rows = (count > 0).nonzero().squeeze(1)  # (B',) the streams that encode a window (callers pick >= 1)
        steps = torch.arange(int((window_end - window_start)[rows].max()), device=rows.device)
        width = (window_end - window_start)[rows]  # (B',)
        index = (window_start - state.features_start)[rows, None] + steps  # (B', W)
        index = index.clamp(0, state.features.shape[1] - 1)  # past a row's width: padding, masked by its length
        windows = torch.gather(state.features[rows], 1, index[..., None].expand(-1, -1, state.features.shape[2]))
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
        frames = encoded.new_zeros(state.batch_size, per_chunk, encoded.shape[2])  # (B, C / s, H_e)
        frames[rows] = torch.gather(encoded, 1, take[..., None].expand(-1, -1, encoded.shape[2]))
        decoder = self.decoder.step(frames, count, state.decoder)
        chunks_done = state.chunks_done + ready.long()
        # keep the features from the start of each stream's next window
        drop = ((chunks_done * self.chunk_frames - self.left_frames).clamp(min=0) - state.features_start).clamp(min=0)
        drop = torch.minimum(drop, state.received - state.features_start)
        kept = [
            state.features[b, drop[b] : state.received[b] - state.features_start[b]] for b in range(state.batch_size)
        ]
        return replace(
            state,
            features=torch.nn.utils.rnn.pad_sequence(kept, batch_first=True),
            features_start=state.features_start + drop,
            chunks_done=chunks_done,
            decoder=decoder,
        )
