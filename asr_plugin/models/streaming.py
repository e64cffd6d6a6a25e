"""Cache-aware streaming of a ConformerEncoder: the step API (NeMo's ``cache_aware_stream_step``).

The functions take the `ConformerEncoder` as ``encoder`` (annotated ``nn.Module``: encoder.py imports this
module, so this one does not import it back).

A model trained with a limited attention context (`asr_plugin.models.context`), causal subsampling and a
causal depthwise convolution computes each encoder frame from a bounded past and a fixed lookahead. A step
takes the next chunk of feature frames of each stream and the state the previous step left, and returns the
chunk's encoder frames: exactly the frames of the whole-utterance forward under the same context's mask.

Usage (F feature bins, D = d_model, L layers)::

    setup = encoder.streaming_setup([70, 13])        # a context the model was trained with
    state = encoder.initial_state(batch_size, setup)
    for features, lengths, final in chunks:          # (B, T, F), (B,), (B,) bool or a bool
        frames, frame_lengths, state = encoder.step(features, lengths, state, setup, final)
        # frames (B, setup.valid_out_len + setup.cache_drop_size, D); row b's first frame_lengths[b] are new

Chunks: a stream's first step takes ``setup.first_chunk_frames`` feature frames, every later one
``setup.chunk_frames`` (in a tensor of width T <= ``setup.max_chunk_frames``, rows left-aligned, ``lengths``
counting each row's frames). A row may instead pass 0 frames (it waits: its state does not change) or, with
``final`` set, any number up to its chunk: the end of its stream, where every frame it still owes comes out.
A stream's state is spent after its final step (`StreamState.reset` starts a new stream in its row). Each
row keeps its own cache fill, so the streams of a batch may start, pause and end at different steps.

The state keeps NeMo's cache layout (the sherpa-onnx online export maps it directly):

- ``cache_last_channel`` (L, B, C, D): each layer's attention inputs of the last C frames
  (C = ``last_channel_cache_size``, the left context),
- ``cache_last_time`` (L, B, D, K - 1): each layer's depthwise convolution inputs of the last K - 1 frames,
- ``cache_last_channel_len`` (B,): how many of the C cached frames are real (a fresh stream has 0),

and the subsampling's input history that NeMo's streaming buffer keeps outside the encoder:

- ``pre_encode_cache`` (B, P, F): the last P feature frames (P = ``pre_encode_cache_size``),
- ``pre_encode_cache_len`` (B,): how many of them are real (0: the stream has not started).

Each step subsamples the window [P cached features | chunk] and drops its first ``drop_extra_pre_encoded``
frames, which the previous step emitted. A fresh stream's window starts 2 x factor masked frames before its
first feature instead, so that its first chunk (``1 + factor * (frames - 1)`` features, as in NeMo) lines up with
the subsampling of the whole utterance. Frames before a stream's start are masked at every subsampling layer,
as the whole-utterance forward's zero padding is (NeMo pads them with zero features, which differs while fewer
than P features precede a chunk: with a right context of 0, at the second chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from asr_plugin.models.attention import relative_sinusoids
from asr_plugin.models.context import blocked_attention
from asr_plugin.models.history import append_history

BUFFERED = "use buffered streaming instead (asr_plugin.decoding.BufferedEncoder)"


@dataclass(frozen=True)
class StreamingSetup:
    """The sizes of cache-aware streaming with one attention context (`streaming_setup`); NeMo's names where
    NeMo has the quantity (its ``CacheAwareStreamingConfig``).

    Attributes:
        att_context_size: (left, right) encoder frames.
        first_chunk_frames: feature frames of a stream's first step (NeMo's ``chunk_size[0]``).
        chunk_frames: feature frames of every later step (NeMo's ``shift_size[1]``).
        valid_out_len: encoder frames a step emits (right + 1 for chunked_limited, 1 for regular).
        cache_drop_size: lookahead encoder frames a step computes after them and drops: the next step computes
            them again with their own lookahead (regular style: (right + conv right) x layers; else 0).
        last_channel_cache_size: C, the attention frames each layer caches (the left context; ``max_context``
            when it is unlimited).
        conv_cache_size: the depthwise convolution frames each layer caches (its left context, K - 1).
        pre_encode_cache_size: P, the feature frames kept for the next step's subsampling.
        drop_extra_pre_encoded: subsampled frames at the start of each window that the previous step emitted.
        subsampling_factor: feature frames per encoder frame.
    """

    att_context_size: tuple[int, int]
    first_chunk_frames: int
    chunk_frames: int
    valid_out_len: int
    cache_drop_size: int
    last_channel_cache_size: int
    conv_cache_size: int
    pre_encode_cache_size: int
    drop_extra_pre_encoded: int
    subsampling_factor: int

    @property
    def max_chunk_frames(self) -> int:
        """The widest features tensor a step takes (first chunks and later ones in one batch)."""
        return max(self.first_chunk_frames, self.chunk_frames)

    @property
    def window_frames(self) -> int:
        """Feature frames the subsampling sees per step: the pre-encode cache and a later chunk."""
        return self.pre_encode_cache_size + self.chunk_frames

    @property
    def frames_per_step(self) -> int:
        """Encoder frames a step computes: ``valid_out_len + cache_drop_size`` (the width of its output)."""
        return self.valid_out_len + self.cache_drop_size


@dataclass(frozen=True)
class StreamState:
    """The state of B streams between steps (see the module docstring for the shapes)."""

    cache_last_channel: torch.Tensor  # (L, B, C, D)
    cache_last_time: torch.Tensor  # (L, B, D, K - 1)
    cache_last_channel_len: torch.Tensor  # (B,) int64
    pre_encode_cache: torch.Tensor  # (B, P, F)
    pre_encode_cache_len: torch.Tensor  # (B,) int64

    @property
    def batch_size(self) -> int:
        return self.pre_encode_cache.shape[0]

    def reset(self, rows: torch.Tensor) -> StreamState:
        """The state with the streams of `rows` ((B,) bool) back at their start (a new stream in each)."""
        if rows.shape != (self.batch_size,) or rows.dtype != torch.bool:
            raise ValueError(f"rows must be a ({self.batch_size},) bool tensor, got {tuple(rows.shape)} {rows.dtype}")
        return StreamState(
            self.cache_last_channel.masked_fill(rows.view(1, -1, 1, 1), 0.0),
            self.cache_last_time.masked_fill(rows.view(1, -1, 1, 1), 0.0),
            self.cache_last_channel_len.masked_fill(rows, 0),
            self.pre_encode_cache.masked_fill(rows.view(-1, 1, 1), 0.0),
            self.pre_encode_cache_len.masked_fill(rows, 0),
        )


def streaming_setup(
    encoder: nn.Module, att_context_size: list[int] | tuple[int, int] | None, max_context: int = 10000
) -> StreamingSetup:
    """The `StreamingSetup` of `encoder` with `att_context_size` (None: its default context).

    Raises ValueError, saying why, for an encoder or context that cannot stream exactly with caches: torchaudio
    blocks, non-causal subsampling, an unlimited right context (a full-context model), a context the model was
    not trained with, or a convolution that looks ahead under chunked_limited.
    """
    if encoder.attention != "rel_pos":
        raise ValueError(f"attention='mha' encoders have no cache-aware streaming; {BUFFERED}")
    context = encoder.checked_context(att_context_size)
    left, right = context
    if right < 0:
        raise ValueError(
            f"att_context_size={list(context)} has an unlimited right context (a full-context model): cache-aware "
            f"streaming needs a model trained with a limited one; {BUFFERED}"
        )
    subsampling = encoder.subsampling
    if not subsampling.causal:
        raise ValueError(
            "cache-aware streaming needs causal subsampling (causal_downsampling=True): this model's subsampling "
            f"sees feature frames after each chunk; {BUFFERED}"
        )
    if max_context < 1:
        raise ValueError(f"max_context={max_context} must be >= 1")
    conv_left, conv_right = encoder.conv_context
    if encoder.att_context_style == "chunked_limited":
        if conv_right:
            raise ValueError(
                f"conv_context_size looks {conv_right} frames ahead: with att_context_style=chunked_limited "
                "cache-aware streaming needs a causal convolution (conv_context_size='causal')"
            )
        valid_out_len, cache_drop_size = right + 1, 0
    else:
        valid_out_len, cache_drop_size = 1, (right + conv_right) * len(encoder.layers)
    factor = subsampling.factor
    drop_extra = 2  # causal stride-2 layers: the first two frames of a window see its zero-padded start
    frames = valid_out_len + cache_drop_size
    pre_encode_cache_size = factor + 1 + factor * cache_drop_size
    return StreamingSetup(
        att_context_size=context,
        first_chunk_frames=1 + factor * (frames - 1),
        chunk_frames=factor * valid_out_len,
        valid_out_len=valid_out_len,
        cache_drop_size=cache_drop_size,
        last_channel_cache_size=left if left >= 0 else max_context,
        conv_cache_size=conv_left,
        pre_encode_cache_size=pre_encode_cache_size,
        drop_extra_pre_encoded=drop_extra,
        subsampling_factor=factor,
    )


def initial_state(
    encoder: nn.Module,
    batch_size: int,
    setup: StreamingSetup,
    device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> StreamState:
    """The `StreamState` of `batch_size` streams that have seen nothing: zeros, nothing filled."""
    layers, d_model = len(encoder.layers), encoder.output_dim
    zeros = dict(device=device, dtype=dtype)
    none = torch.zeros(batch_size, dtype=torch.int64, device=device)
    return StreamState(
        cache_last_channel=torch.zeros(layers, batch_size, setup.last_channel_cache_size, d_model, **zeros),
        cache_last_time=torch.zeros(layers, batch_size, d_model, setup.conv_cache_size, **zeros),
        cache_last_channel_len=none,
        pre_encode_cache=torch.zeros(batch_size, setup.pre_encode_cache_size, encoder.input_dim, **zeros),
        pre_encode_cache_len=none.clone(),
    )


def step(
    encoder: nn.Module,
    features: torch.Tensor,
    lengths: torch.Tensor,
    state: StreamState,
    setup: StreamingSetup,
    final: torch.Tensor | bool = False,
) -> tuple[torch.Tensor, torch.Tensor, StreamState]:
    """One step of B streams (the encoder in eval mode).

    Args:
        features: (B, T, F) float, T <= ``setup.max_chunk_frames``; row b's frames first.
        lengths: (B,) int64: a stream's first step takes ``setup.first_chunk_frames``, a later one
            ``setup.chunk_frames``; 0 (the stream waits), or fewer with `final`.
        state: the state the previous step returned (or `initial_state`).
        setup: `streaming_setup` of the context to run (the same at every step of a stream).
        final: (B,) bool or one bool: the streams whose last features these are.
    Returns:
        frames: (B, ``setup.frames_per_step``, D) float, row b's first frame_lengths[b] new, the rest zero;
        frame_lengths: (B,) int64: ``valid_out_len`` for a full chunk, 0 for a waiting stream, what is left
            for a final one;
        the next state.
    """
    final = _check_step(encoder, features, lengths, state, setup, final)
    return step_unchecked(encoder, features, lengths.to(features.device), state, setup, final)


def step_unchecked(
    encoder: nn.Module,
    features: torch.Tensor,
    lengths: torch.Tensor,
    state: StreamState,
    setup: StreamingSetup,
    final: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, StreamState]:
    """`step` without its argument checks, whose host reads ``torch.export`` cannot trace: the ONNX streaming
    export runs this on the windows it is given (`asr_plugin.export.streaming_modules`). The caller guarantees
    what `step` checks; `final` is a (B,) bool tensor and `lengths` are on the features' device."""
    x, computed = _subsample(encoder, features, lengths, state, setup)  # (B, frames, D), (B,)
    waiting = (lengths == 0) & ~final
    emitted = torch.where(final, computed, torch.where(waiting, 0, computed.clamp(max=setup.valid_out_len)))
    cache_size = setup.last_channel_cache_size
    steps = torch.arange(x.shape[1], device=x.device)
    padding_mask = steps >= computed.unsqueeze(1)  # (B, frames)
    cached = torch.arange(cache_size, device=x.device) >= cache_size - state.cache_last_channel_len.unsqueeze(1)
    key_valid = torch.cat([cached, ~padding_mask], dim=1)  # (B, C + frames)
    attention_mask = blocked_attention(
        setup.att_context_size, encoder.att_context_style, ~padding_mask, key_valid, key_offset=-cache_size
    )
    pos_emb = relative_sinusoids(cache_size + x.shape[1], x.shape[2], x.device).to(x.dtype)
    channel, time = [], []
    for index, layer in enumerate(encoder.layers):
        x, channel_history, time_history = layer.step(
            x,
            pos_emb,
            padding_mask,
            attention_mask,
            state.cache_last_channel[index],
            state.cache_last_time[index],
            emitted,
        )
        channel.append(channel_history)
        time.append(time_history)
    frames = x.masked_fill((steps >= emitted.unsqueeze(1)).unsqueeze(2), 0.0)
    next_state = StreamState(
        cache_last_channel=torch.stack(channel),
        cache_last_time=torch.stack(time),
        cache_last_channel_len=(state.cache_last_channel_len + emitted).clamp(max=cache_size),
        pre_encode_cache=append_history(state.pre_encode_cache, features, lengths),
        pre_encode_cache_len=(state.pre_encode_cache_len + lengths).clamp(max=setup.pre_encode_cache_size),
    )
    return frames, emitted, next_state


def _subsample(
    encoder: nn.Module,
    features: torch.Tensor,
    lengths: torch.Tensor,
    state: StreamState,
    setup: StreamingSetup,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's encoder-rate frames before the Conformer blocks: (B, frames, D) and (B,) how many are real.

    Subsamples the window [P cached features | chunk], or for a fresh stream [2 * factor masked frames | first
    chunk], with the frames before each stream's start masked at every layer, and drops the first
    ``drop_extra_pre_encoded`` frames (the previous step's).
    """
    window_frames, drop = setup.window_frames, setup.drop_extra_pre_encoded
    fresh = state.pre_encode_cache_len == 0  # (B,)
    padded = torch.nn.functional.pad(features, (0, 0, 0, window_frames - features.shape[1]))  # (B, W, F)
    later = torch.cat([state.pre_encode_cache, padded], dim=1)[:, :window_frames]
    lead = drop * setup.subsampling_factor
    first = torch.nn.functional.pad(padded, (0, 0, lead, 0))[:, :window_frames]
    window = torch.where(fresh.view(-1, 1, 1), first, later)  # (B, W, F)
    offset = torch.where(fresh, lead, setup.pre_encode_cache_size)  # (B,) window index of the chunk's first frame
    starts = torch.where(fresh, lead, setup.pre_encode_cache_size - state.pre_encode_cache_len)
    x, ends = encoder.subsampling(window, offset + lengths, starts)  # (B, frames + drop, D)
    computed = torch.where(fresh & (lengths == 0), 0, (ends - drop).clamp(min=0))
    x = x[:, drop:]
    return (x if encoder.xscale is None else x * encoder.xscale), computed


def _check_step(
    encoder: nn.Module,
    features: torch.Tensor,
    lengths: torch.Tensor,
    state: StreamState,
    setup: StreamingSetup,
    final: torch.Tensor | bool,
) -> torch.Tensor:
    """ValueError naming what is wrong with a step's arguments; returns `final` as a (B,) bool tensor."""
    if encoder.training:
        raise ValueError("step() needs the encoder in eval mode (encoder.eval()): dropout and batch statistics")
    if features.dim() != 3 or features.shape[2] != encoder.input_dim:
        raise ValueError(f"features must be (B, T, {encoder.input_dim}), got {tuple(features.shape)}")
    batch = features.shape[0]
    if state.batch_size != batch or lengths.shape != (batch,):
        raise ValueError(
            f"features hold {batch} streams, lengths {tuple(lengths.shape)} and the state {state.batch_size}"
        )
    if state.pre_encode_cache.shape[1] != setup.pre_encode_cache_size or (
        state.cache_last_channel.shape[2] != setup.last_channel_cache_size
    ):
        raise ValueError("the state was made for another StreamingSetup: use encoder.initial_state(batch, setup)")
    if features.shape[1] > setup.max_chunk_frames:
        raise ValueError(
            f"features have {features.shape[1]} frames; a step takes at most {setup.max_chunk_frames} "
            f"(first chunk {setup.first_chunk_frames}, later chunks {setup.chunk_frames})"
        )
    final = torch.as_tensor(final, dtype=torch.bool, device=features.device).expand(batch)
    rows = zip(lengths.tolist(), (state.pre_encode_cache_len == 0).tolist(), final.tolist())
    for row, (length, fresh, last) in enumerate(rows):
        chunk = setup.first_chunk_frames if fresh else setup.chunk_frames
        if not 0 <= length <= min(chunk, features.shape[1]):
            raise ValueError(
                f"lengths[{row}]={length}: stream {row} takes {chunk} feature frames at this step "
                f"({'its first' if fresh else 'a later'} chunk), within the {features.shape[1]} given"
            )
        if 0 < length < chunk and not last:
            raise ValueError(
                f"lengths[{row}]={length} is shorter than the {chunk} feature frames the subsampling needs for "
                f"{setup.valid_out_len} encoder frames ({'first' if fresh else 'later'} chunk): pass a full "
                "chunk, or final=True at the end of the stream"
            )
    return final


def encode_in_chunks(
    encoder: nn.Module, features: torch.Tensor, lengths: torch.Tensor, setup: StreamingSetup
) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole utterances streamed chunk by chunk through `step`: (B, T, F), (B,) -> (B, T', D) frames, (B,) int64.

    Every stream starts at the first step and ends (``final``) at its last chunk; the frames equal the
    whole-utterance forward's with ``setup.att_context_size`` (what streaming is tested against).
    """
    batch = features.shape[0]
    state = initial_state(encoder, batch, setup, features.device, features.dtype)
    totals, consumed = lengths.tolist(), [0] * batch
    pieces: list[list[torch.Tensor]] = [[] for _ in range(batch)]
    while any(done < total for done, total in zip(consumed, totals)):
        sizes = [
            min(setup.first_chunk_frames if done == 0 else setup.chunk_frames, total - done)
            for done, total in zip(consumed, totals)
        ]
        width = max(sizes)
        chunk = torch.stack(
            [
                torch.nn.functional.pad(features[row, done : done + size], (0, 0, 0, width - size))
                for row, (done, size) in enumerate(zip(consumed, sizes))
            ]
        )  # (B, width, F)
        final = torch.tensor(
            [size > 0 and done + size == total for done, size, total in zip(consumed, sizes, totals)],
            device=features.device,
        )
        frames, counts, state = step(encoder, chunk, torch.tensor(sizes, device=features.device), state, setup, final)
        for row, count in enumerate(counts.tolist()):
            pieces[row].append(frames[row, :count])
            consumed[row] += sizes[row]
    outputs = [torch.cat(row) for row in pieces]
    out_lengths = torch.tensor([len(row) for row in outputs], dtype=torch.int64, device=features.device)
    return torch.nn.utils.rnn.pad_sequence(outputs, batch_first=True), out_lengths
