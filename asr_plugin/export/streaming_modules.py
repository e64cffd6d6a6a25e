"""The encoder of a cache-aware streaming model as sherpa-onnx's online NeMo transducer calls it: one window of
feature frames and NeMo's three caches in, the window's encoder frames and the next caches out.

sherpa-onnx (``OnlineRecognizerTransducerNeMoImpl::DecodeStreams``) feeds the encoder fixed windows of
``window_size`` feature frames, each ``chunk_shift`` frames after the one before, from the stream's first frame on,
with ``length`` always ``window_size``, and keeps only the three caches between windows (its initial ones zeros
and ``cache_last_channel_len`` 0). With ``window_size`` = P + ``chunk_frames`` and ``chunk_shift`` =
``chunk_frames`` (P = ``pre_encode_cache_size``; NeMo's own export chooses the same), every window after the
first is exactly a later step of the step API: [the P features before the chunk | the chunk]. The first window
(``cache_last_channel_len`` 0) is [2f frames | a first chunk of ``first_chunk_frames``] (2f =
``drop_extra_pre_encoded`` x the subsampling factor, and 2f + ``first_chunk_frames`` = ``window_size``): it
becomes the step API's first step, whose window holds 2f masked frames before the stream's start, so those 2f
frames are masked too. A stream in sherpa-onnx is therefore the step API's stream of its features from frame 2f
on, exactly (`asr_plugin.export.sherpa_online_decode.streaming_on_sherpa_windows` is that reference).

The step API's state beyond the caches is rebuilt from the window: the pre-encode cache is the window's first P
frames, and how many of them follow the stream's start comes from ``cache_last_channel_len``, the encoder
frames emitted so far (each full window emits ``valid_out_len``): exact until it stops at the attention cache's
size C, and with C >= 2 a stream that far has a full pre-encode cache (`asr_plugin.export.onnx_streaming`
refuses a smaller C).
"""

from __future__ import annotations

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


class SherpaStreamingEncoder(nn.Module):
    """One window of B streams in sherpa-onnx's NeMo layout (batch first, channels before time):

    (B, F, W) features, (B,) int64 frames (W: sherpa passes ``window_size``), (B, L, C, D) cache_last_channel,
    (B, L, D, K - 1) cache_last_time, (B,) int64 cache_last_channel_len ->
    (B, H_j, ``valid_out_len``) projected encoder frames (the joint's encoder projection, as the offline export's),
    (B,) int64 how many are valid, and the three next caches.
    """

    def __init__(self, model: Transducer, setup: StreamingSetup) -> None:
        super().__init__()
        self.encoder = model.encoder
        self.project = model.joint.encoder_proj
        self.setup = setup
        self.lead = setup.drop_extra_pre_encoded * setup.subsampling_factor  # the first window's masked frames

    def forward(
        self,
        audio_signal: torch.Tensor,
        length: torch.Tensor,
        cache_last_channel: torch.Tensor,
        cache_last_time: torch.Tensor,
        cache_last_channel_len: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        setup = self.setup
        window = audio_signal.transpose(1, 2)  # (B, W, F)
        fresh = cache_last_channel_len == 0  # (B,) a stream's first window
        width, cached = setup.max_chunk_frames, setup.pre_encode_cache_size

        def chunk_from(start: int) -> torch.Tensor:  # (B, max_chunk_frames, F): the window from `start` on
            chunk = window[:, start:]
            return nn.functional.pad(chunk, (0, 0, 0, width - chunk.shape[1]))

        features = torch.where(fresh.view(-1, 1, 1), chunk_from(self.lead), chunk_from(cached))
        lengths = (length - torch.where(fresh, self.lead, cached)).clamp(min=0)
        state = StreamState(
            cache_last_channel=cache_last_channel.transpose(0, 1),  # (L, B, C, D)
            cache_last_time=cache_last_time.transpose(0, 1),  # (L, B, D, K - 1)
            cache_last_channel_len=cache_last_channel_len,
            pre_encode_cache=window[:, :cached],  # (B, P, F); unread for a first window
            pre_encode_cache_len=preceding_features(cache_last_channel_len, setup),
        )
        frames, counts, state = step_unchecked(self.encoder, features, lengths, state, setup, torch.zeros_like(fresh))
        frames = self.project(frames[:, : setup.valid_out_len])  # (B, valid_out_len, H_j)
        return (
            frames.transpose(1, 2),
            counts,
            state.cache_last_channel.transpose(0, 1),
            state.cache_last_time.transpose(0, 1),
            state.cache_last_channel_len,
        )
