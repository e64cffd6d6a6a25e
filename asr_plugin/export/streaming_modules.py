"""The encoder of a cache-aware streaming model as sherpa-onnx's online NeMo transducer calls it: one window of
feature frames and NeMo's three caches in, the window's encoder frames and the next caches out.

sherpa-onnx (``OnlineRecognizerTransducerNeMoImpl::DecodeStreams``) feeds the encoder fixed windows of
``window_size`` feature frames, each ``chunk_shift`` frames after the one before, from the stream's first frame on,
with ``length`` always ``window_size``, and keeps only the three caches between windows (its initial ones zeros
and ``cache_last_channel_len`` 0); it adds no silence before a stream.

The step API's grid does not fit such windows by itself: its first chunk (``first_chunk_frames``) is shorter
than the later ones, and each later step reads the P = ``pre_encode_cache_size`` features before its chunk, so
step k >= 1 needs the stream's feature frames [k c - 2f, first + k c) (c = ``chunk_frames``, 2f =
``drop_extra_pre_encoded`` x the subsampling factor: P + c = 2f + first), which starts 2f frames before any window
that shifts by c from frame 0. NeMo's own export makes its first window the pre-encode cache of a full chunk
instead (and so never hears a stream's first P frames). This encoder carries the stream's last 2f feature frames
in the caches, behind the convolution's frames of ``cache_last_time`` (`FeatureCarry`; sherpa-onnx only stores,
batches and returns caches, with the shapes the metadata gives), so that window k is
[the 2f carried frames | the window] = [k c - 2f, k c + ``window_size``): step k of the step API on the stream's
features from its first frame, with ``window_size`` = max(first, c) so that no frame falls between windows and each
step's chunk lies in its window. A fresh stream's carried frames are zeros where the step API masks 2f frames
before a stream's start. A stream in sherpa-onnx is therefore exactly the step API's stream of its features
(`asr_plugin.export.sherpa_online_decode.streaming_on_sherpa_windows` is that reference).

The step API's state beyond the caches is rebuilt from that window: the pre-encode cache is its first P frames,
and how many of them follow the stream's start comes from ``cache_last_channel_len``, the encoder frames emitted
so far (each full window emits ``valid_out_len``): exact until it stops at the attention cache's size C, and with
C >= 2 a stream that far has a full pre-encode cache (`asr_plugin.export.onnx_streaming` refuses a smaller C).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from asr_plugin.models import StreamingSetup, StreamState, Transducer
from asr_plugin.models.streaming import step_unchecked


def preceding_features(emitted: torch.Tensor, setup: StreamingSetup) -> torch.Tensor:
    """(B,) int64 encoder frames a stream has emitted (``cache_last_channel_len``) -> (B,) int64 feature frames of
    it in the pre-encode cache before its next chunk: 0 before its first window, else what it consumed (a first
    chunk and ``emitted / valid_out_len - 1`` chunks) up to P."""
    consumed = setup.first_chunk_frames + setup.subsampling_factor * (emitted - setup.valid_out_len)
    return torch.where(emitted == 0, 0, consumed.clamp(min=0, max=setup.pre_encode_cache_size))


@dataclass(frozen=True)
class FeatureCarry:
    """sherpa-onnx's windows of one `StreamingSetup`, and where the 2f feature frames a window leaves to the next
    travel: flattened into ``slots`` extra frames of ``cache_last_time`` (L, D, K - 1 + slots) after the
    convolution's K - 1."""

    setup: StreamingSetup
    feature_dim: int
    layers: int
    d_model: int

    @property
    def carried_frames(self) -> int:
        """2f: the feature frames before a window that its step reads."""
        return self.setup.drop_extra_pre_encoded * self.setup.subsampling_factor

    @property
    def window_size(self) -> int:
        """Feature frames per window: every frame in one, each step's chunk inside its window."""
        return max(self.setup.first_chunk_frames, self.setup.chunk_frames)

    @property
    def chunk_shift(self) -> int:
        return self.setup.chunk_frames

    @property
    def slots(self) -> int:
        return math.ceil(self.carried_frames * self.feature_dim / (self.layers * self.d_model))

    @property
    def time_cache_frames(self) -> int:
        """``cache_last_time``'s last axis: the convolution's frames and the carried features."""
        return self.setup.conv_cache_size + self.slots

    def unpack(self, cache_last_time: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, D, K - 1 + slots) -> the convolution's (B, L, D, K - 1) and the carried (B, 2f, F) features."""
        conv = self.setup.conv_cache_size
        size = self.carried_frames * self.feature_dim
        carried = cache_last_time[..., conv:].flatten(1)[:, :size]
        return cache_last_time[..., :conv], carried.reshape(-1, self.carried_frames, self.feature_dim)

    def pack(self, conv_cache: torch.Tensor, carried: torch.Tensor) -> torch.Tensor:
        """The inverse of `unpack` (the slots' unused tail zero)."""
        flat = carried.flatten(1)
        flat = nn.functional.pad(flat, (0, self.layers * self.d_model * self.slots - flat.shape[1]))
        return torch.cat([conv_cache, flat.reshape(-1, self.layers, self.d_model, self.slots)], dim=-1)


class SherpaStreamingEncoder(nn.Module):
    """One window of B streams in sherpa-onnx's NeMo layout (batch first, channels before time):

    (B, F, W) features (W = ``FeatureCarry.window_size``), (B,) int64 frames (sherpa passes W),
    (B, L, C, D) cache_last_channel, (B, L, D, K - 1 + slots) cache_last_time (the convolution's frames, then the
    carried features), (B,) int64 cache_last_channel_len ->
    (B, H_j, ``valid_out_len``) projected encoder frames (the joint's encoder projection, as the offline export's),
    (B,) int64 how many are valid, and the three next caches.
    """

    def __init__(self, model: Transducer, setup: StreamingSetup) -> None:
        super().__init__()
        self.encoder = model.encoder
        self.project = model.joint.encoder_proj
        self.setup = setup
        self.carry = FeatureCarry(setup, model.encoder.input_dim, len(model.encoder.layers), model.encoder.output_dim)

    def forward(
        self,
        audio_signal: torch.Tensor,
        length: torch.Tensor,
        cache_last_channel: torch.Tensor,
        cache_last_time: torch.Tensor,
        cache_last_channel_len: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        setup, carry = self.setup, self.carry
        conv_cache, carried = carry.unpack(cache_last_time)
        frames_in = torch.cat([carried, audio_signal.transpose(1, 2)], dim=1)  # (B, 2f + W, F) from k c - 2f on
        window = frames_in[:, : setup.window_frames]  # (B, P + c, F): the step API's window, [2f | first] if fresh
        fresh = cache_last_channel_len == 0  # (B,) a stream's first window
        width, cached, lead = setup.max_chunk_frames, setup.pre_encode_cache_size, carry.carried_frames

        def chunk_from(start: int) -> torch.Tensor:  # (B, max_chunk_frames, F): the window from `start` on
            chunk = window[:, start:]
            return nn.functional.pad(chunk, (0, 0, 0, width - chunk.shape[1]))

        features = torch.where(fresh.view(-1, 1, 1), chunk_from(lead), chunk_from(cached))
        window_length = (length + lead).clamp(max=setup.window_frames)
        lengths = (window_length - torch.where(fresh, lead, cached)).clamp(min=0)
        state = StreamState(
            cache_last_channel=cache_last_channel.transpose(0, 1),  # (L, B, C, D)
            cache_last_time=conv_cache.transpose(0, 1),  # (L, B, D, K - 1)
            cache_last_channel_len=cache_last_channel_len,
            pre_encode_cache=window[:, :cached],  # (B, P, F); unread for a first window
            pre_encode_cache_len=preceding_features(cache_last_channel_len, setup),
        )
        frames, counts, state = step_unchecked(self.encoder, features, lengths, state, setup, torch.zeros_like(fresh))
        frames = self.project(frames[:, : setup.valid_out_len])  # (B, valid_out_len, H_j)
        next_carried = frames_in[:, carry.chunk_shift : carry.chunk_shift + lead]  # the next window's 2f before it
        return (
            frames.transpose(1, 2),
            counts,
            state.cache_last_channel.transpose(0, 1),
            carry.pack(state.cache_last_time.transpose(0, 1), next_carried),
            state.cache_last_channel_len,
        )
