"""A streaming recognition session over B streams: audio pieces (or feature frames) in, partial and final text
out, with endpointing.

    audio pieces -> features (a `FeatureStream`: `asr_plugin.frontend.online.fbank.StreamingFbank`)
                 -> encoder frames (an `EncoderStream`: `CacheAwareEncoder` for a streaming model,
                    `BufferedEncoder` for any offline one)
                 -> `StreamingGreedyDecoder` -> partial hypotheses; `Endpointing` -> final segments

One encoder chunk at a time: after each, the decoder decodes its frames and the endpoint rules are checked, as
sherpa-onnx's online recogniser checks them after each ``DecodeStreams``; a stream at an endpoint closes its
segment (its text is final), and its decoder (predictor back to the start symbol) and encoder stream (a
cache-aware encoder's caches) start afresh. The session takes no feature or encoder code of its own: they are
given to it, so it depends on neither the data layer nor a particular encoder.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch

from asr_plugin.decoding.endpointing import Endpointing
from asr_plugin.decoding.fusion import Fusion
from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder
from asr_plugin.decoding.streaming_greedy import GreedyState, StreamingGreedyDecoder
from asr_plugin.models import Transducer

Step = tuple[torch.Tensor, torch.Tensor, Any]  # (B, T, X) new items, (B,) int64 counts per stream, the new state


class FeatureStream(Protocol):
    """Audio pieces -> feature frames (`asr_plugin.frontend.online.fbank.StreamingFbank`)."""

    num_mel_bins: int

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> Any: ...

    def accept(
        self, audio: torch.Tensor, lengths: torch.Tensor, state: Any, sample_rate: int | None = None
    ) -> Step: ...

    def flush(self, state: Any, streams: torch.Tensor | None = None) -> Step: ...


class EncoderStream(Protocol):
    """Feature frames -> encoder frames, one chunk per stream and step (`CacheAwareEncoder`, `BufferedEncoder`)."""

    def initial_state(self, batch_size: int, feature_dim: int, device: torch.device | str = "cpu") -> Any: ...

    def append(self, features: torch.Tensor, lengths: torch.Tensor, state: Any) -> Any: ...

    def end(self, state: Any, streams: torch.Tensor) -> Any: ...

    def reset(self, state: Any, streams: torch.Tensor) -> Any: ...

    def step(self, state: Any) -> Step | None: ...


@dataclass(frozen=True)
class Segment:
    """A final result: the text between two endpoints (or the start or end of the stream).

    Attributes:
        hypothesis: its tokens, their encoder frames (counted from the stream's start), score and text.
        start_frame, end_frame: the encoder frames it covers, [start_frame, end_frame).
        rule: the endpoint rule that closed it (1, 2, 3), 0 for the end of the stream.
    """

    hypothesis: Hypothesis
    start_frame: int
    end_frame: int
    rule: int


@dataclass(frozen=True)
class RecognizerState:
    """The session's state of B streams (a value).

    Attributes:
        features: the feature stream's state (None when the session takes feature frames).
        encoder: the encoder stream's state.
        decoder: the greedy decoder's state (the current segments' hypotheses).
        segments: each stream's final segments so far.
        ended: (B,) bool, streams that have been finished.
    """

    features: Any
    encoder: Any
    decoder: GreedyState
    segments: tuple[tuple[Segment, ...], ...]
    ended: torch.Tensor


class StreamingRecognizer:
    """Recognises B streams as their audio arrives (see the module docstring).

    ``accept(audio, lengths, state)`` takes stream b's next ``lengths[b]`` samples (feature frames when the
    session has no feature stream), ``finish(state, streams)`` ends streams, ``partial(state)`` is each stream's
    current segment and ``segments(state)`` its final ones; a segment with no token is not kept.

    Args:
        model: the transducer (eval mode), whose predictor and joint decode.
        encoder: the encoder stream (`CacheAwareEncoder` or `BufferedEncoder` of the same model).
        features: the feature stream for audio input; None: the session takes feature frames.
        feature_dim: F, the feature frames' size (the feature stream's ``num_mel_bins`` when it has one).
        max_symbols_per_frame: the greedy search's cap.
        endpointing: the endpoint rules (None: a stream is one segment until it is finished).
        tokenizer: gives each hypothesis its ``text``.
        max_streams: the most streams `initial_state` takes (None: any number). Each stream's state stays in
            memory while it lives: a cache-aware encoder's caches, num_layers x (left context + conv cache) x
            d_model floats, the predictor's state and its feature history (docs/streaming.md, "Memory per stream").
        fusion: shallow-fusion scorers and their weights (phrase boosting, an n-gram LM) of this recogniser's
            streams; each stream keeps its own scorer states and an endpoint starts them afresh.
    """

    def __init__(
        self,
        model: Transducer,
        encoder: EncoderStream,
        features: FeatureStream | None = None,
        feature_dim: int | None = None,
        max_symbols_per_frame: int = 10,
        endpointing: Endpointing | None = None,
        tokenizer: TokenDecoder | None = None,
        max_streams: int | None = None,
        fusion: Fusion = (),
    ) -> None:
        if features is not None:
            feature_dim = features.num_mel_bins if feature_dim is None else feature_dim
            if feature_dim != features.num_mel_bins:
                raise ValueError(f"feature_dim={feature_dim}, the feature stream gives {features.num_mel_bins} bins")
        if feature_dim is None:
            raise ValueError("feature_dim is needed when the session takes feature frames (no feature stream)")
        self.encoder = encoder
        self.features = features
        self.feature_dim = feature_dim
        self.decoder = StreamingGreedyDecoder(model, max_symbols_per_frame, fusion=fusion)
        self.endpointing = endpointing
        self.tokenizer = tokenizer
        self.max_streams = max_streams

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> RecognizerState:
        """The state of `batch_size` streams before any input (ValueError past `max_streams`)."""
        if self.max_streams is not None and batch_size > self.max_streams:
            raise ValueError(f"{batch_size} streams: this recogniser takes at most max_streams={self.max_streams}")
        return RecognizerState(
            features=None if self.features is None else self.features.initial_state(batch_size, device),
            encoder=self.encoder.initial_state(batch_size, self.feature_dim, device),
            decoder=self.decoder.initial_state(batch_size, device),
            segments=((),) * batch_size,
            ended=torch.zeros(batch_size, dtype=torch.bool, device=device),
        )

    def accept(
        self, pieces: torch.Tensor, lengths: torch.Tensor, state: RecognizerState, sample_rate: int | None = None
    ) -> RecognizerState:
        """Takes (B, S) audio (or (B, T, F) feature frames without a feature stream), stream b's first
        ``lengths[b]`` (0: nothing this time), and decodes every encoder chunk that became ready. Audio at
        `sample_rate` (None: the front end's) is checked, scaled and resampled by the feature stream
        (`asr_plugin.audio.pieces`: NaN refused by stream and sample, int16 PCM scaled)."""
        features, feature_state = pieces, state.features
        if self.features is not None:
            features, lengths, feature_state = self.features.accept(pieces, lengths, state.features, sample_rate)
        encoder = self.encoder.append(features, lengths, state.encoder)
        return self.run(replace(state, features=feature_state, encoder=encoder))

    def finish(self, state: RecognizerState, streams: torch.Tensor | None = None) -> RecognizerState:
        """Ends the streams where `streams` ((B,) bool; all by default) is True: their last features and encoder
        frames are decoded and their last segment becomes final."""
        streams = torch.ones_like(state.ended) if streams is None else streams.to(state.ended.device)
        if streams.shape != state.ended.shape or streams.dtype != torch.bool:
            raise ValueError(
                f"streams must be a (B,)=({len(state.ended)},) bool tensor, got {streams.dtype} {tuple(streams.shape)}"
            )
        ending = streams & ~state.ended
        encoder, feature_state = state.encoder, state.features
        if self.features is not None:
            features, lengths, feature_state = self.features.flush(state.features, ending)
            encoder = self.encoder.append(features, lengths, encoder)
        encoder = self.encoder.end(encoder, ending)
        state = self.run(replace(state, features=feature_state, encoder=encoder))
        state = self.close_segments(state, ending, torch.zeros_like(state.decoder.frames_done))
        return replace(state, ended=state.ended | ending)

    def partial(self, state: RecognizerState) -> list[Hypothesis]:
        """Each stream's current (not yet final) segment; empty once the stream is finished."""
        return self.decoder.hypotheses(state.decoder, self.tokenizer)

    def segments(self, state: RecognizerState) -> list[list[Segment]]:
        """Each stream's final segments so far."""
        return [list(segments) for segments in state.segments]

    def run(self, state: RecognizerState) -> RecognizerState:
        """Encodes and decodes chunks until no stream has one ready, closing segments at endpoints."""
        while (step := self.encoder.step(state.encoder)) is not None:
            frames, counts, encoder = step
            state = replace(state, encoder=encoder, decoder=self.decoder.step(frames, counts, state.decoder))
            if self.endpointing is not None:
                rules = self.endpointing.rules_fired(state.decoder)
                if bool(rules.any()):
                    state = self.close_segments(state, rules > 0, rules)
                    state = replace(state, encoder=self.encoder.reset(state.encoder, rules > 0))
        return state

    def close_segments(self, state: RecognizerState, streams: torch.Tensor, rules: torch.Tensor) -> RecognizerState:
        """Makes the current segments of `streams` ((B,) bool) final (those with tokens are kept) and starts new
        ones; `rules`: (B,) the endpoint rule of each (0: the end of the stream)."""
        if not bool(streams.any()):
            return state
        hyps = self.decoder.hypotheses(state.decoder, self.tokenizer)
        starts, ends = state.decoder.segment_start.tolist(), state.decoder.frames_done.tolist()
        segments = tuple(
            done + (Segment(hyp, start, end, rule),) if close and hyp.tokens else done
            for done, hyp, start, end, rule, close in zip(
                state.segments, hyps, starts, ends, rules.tolist(), streams.tolist()
            )
        )
        return replace(state, segments=segments, decoder=self.decoder.reset(state.decoder, streams))
