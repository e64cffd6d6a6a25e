"""The encoder stream of a cache-aware streaming model: feature frames in, encoder frames out, through the
encoder's step API (``encoder.streaming_setup``, ``initial_state``, ``step``; `asr_plugin.models.streaming`).

A stream's first step takes ``setup.first_chunk_frames`` feature frames, every later one ``setup.chunk_frames``;
at its end one final step takes what is left (up to a chunk) and gives every frame the stream still owes. At an
endpoint the stream's encoder caches start afresh, as sherpa-onnx's online NeMo recogniser resets them
(``OnlineRecognizerTransducerNeMoImpl::Reset``); the features go on (sherpa-onnx does not reset its feature
extractor either).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from asr_plugin.frontend.online.feature_buffer import FeatureBuffer
from asr_plugin.models import Transducer


@dataclass(frozen=True)
class CacheAwareState:
    """The state of B streams (a value).

    Attributes:
        buffer: each stream's feature frames not yet stepped.
        encoder: the encoder's ``StreamState`` (its caches, NeMo's layout).
        final_done: (B,) bool, streams whose final step has run.
    """

    buffer: FeatureBuffer
    encoder: Any
    final_done: torch.Tensor


class CacheAwareEncoder:
    """Steps a cache-aware streaming encoder over B streams of feature frames.

    Args:
        model: a transducer whose encoder streams (trained with a limited attention context, causal
            subsampling and convolution); in eval mode.
        att_context_size: the [left, right] context to run, one the model was trained with (None: its default).
    """

    def __init__(self, model: Transducer, att_context_size: list[int] | tuple[int, int] | None = None) -> None:
        encoder = model.encoder
        if not callable(getattr(encoder, "streaming_setup", None)):
            raise ValueError(
                f"{type(encoder).__name__} has no cache-aware streaming step: use buffered streaming "
                "(asr_plugin.decoding.buffered.BufferedEncoder) for a full-context model"
            )
        self.encoder = encoder
        self.setup = encoder.streaming_setup(att_context_size)  # ValueError saying why a model cannot stream

    @property
    def subsampling_factor(self) -> int:
        return self.setup.subsampling_factor

    def initial_state(self, batch_size: int, feature_dim: int, device: torch.device | str = "cpu") -> CacheAwareState:
        """The state of `batch_size` streams of `feature_dim`-bin features before any frame."""
        return CacheAwareState(
            buffer=FeatureBuffer.empty(batch_size, feature_dim, device),
            encoder=self.encoder.initial_state(batch_size, self.setup, device=torch.device(device)),
            final_done=torch.zeros(batch_size, dtype=torch.bool, device=device),
        )

    def append(self, features: torch.Tensor, lengths: torch.Tensor, state: CacheAwareState) -> CacheAwareState:
        """With stream b's first ``lengths[b]`` frames of (B, T, F) `features` appended."""
        return replace(state, buffer=state.buffer.appended(features, lengths))

    def end(self, state: CacheAwareState, streams: torch.Tensor) -> CacheAwareState:
        """With the streams where `streams` ((B,) bool) is True ended: a final step gives their last frames."""
        return replace(state, buffer=state.buffer.ended(streams))

    def reset(self, state: CacheAwareState, streams: torch.Tensor) -> CacheAwareState:
        """The encoder caches of the streams where `streams` is True start afresh (a new segment after an
        endpoint); their next step takes a first chunk."""
        return replace(state, encoder=state.encoder.reset(streams.to(state.final_done.device)))

    @torch.no_grad()
    def step(self, state: CacheAwareState) -> tuple[torch.Tensor, torch.Tensor, CacheAwareState] | None:
        """One encoder step of every stream with a whole chunk of features (or an ended stream's final step):
        (B, T_out, H_e) frames, stream b's first ``counts[b]`` new, (B,) int64 counts, the new state; None when
        no stream can step."""
        setup, buffer = self.setup, state.buffer
        fresh = state.encoder.pre_encode_cache_len == 0  # (B,) the next step is a stream's first chunk
        need = torch.where(fresh, setup.first_chunk_frames, setup.chunk_frames)
        final = buffer.finished & ~state.final_done & (buffer.held <= need)
        full = (buffer.held >= need) & ~final
        if not bool((full | final).any()):
            return None
        lengths = torch.where(full, need, torch.where(final, buffer.held, 0))
        features = buffer.frames(buffer.start, lengths, width=setup.max_chunk_frames)  # (B, T, F)
        frames, counts, encoder_state = self.encoder.step(features, lengths, state.encoder, setup, final)
        return (
            frames,
            counts,
            CacheAwareState(
                buffer=buffer.dropped_before(buffer.start + lengths),
                encoder=encoder_state,
                final_done=state.final_done | final,
            ),
        )
