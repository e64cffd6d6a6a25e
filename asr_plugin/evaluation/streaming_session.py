"""A model file's streaming recognition session: how to stream (`StreamingMode`), checked against what the model
can do, and the `asr_plugin.decoding.StreamingRecognizer` that does it, with the online features of the model's own
front end (`asr_plugin.frontend.online.extractors`) and sherpa-onnx's endpoint rules.

Two modes (docs/streaming.md, "Transcribing and evaluating as a stream"):

- ``cache_aware``: a model trained to stream (limited attention context, causal subsampling and convolution) is
  stepped chunk by chunk with caches at one of its contexts; its encoder chunk is the context's
  (`asr_plugin.models.streaming.StreamingSetup`). The result equals the whole-utterance forward under that context.
  Its front end must be computable as audio arrives (no per-utterance normalisation).
- ``buffered``: any model, full-context ones included, re-encodes overlapping windows (`BufferedEncoder`, NeMo's
  buffered inference); a per-utterance normalisation runs on each window.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

import torch

from asr_plugin.decoding import (
    BufferedEncoder,
    CacheAwareEncoder,
    Endpointing,
    StreamingRecognizer,
    encoder_frame_shift,
    subsampling_factor,
)
from asr_plugin.evaluation.decoding_settings import model_tokenizer
from asr_plugin.evaluation.fusion_spec import NO_FUSION, FusionSpec
from asr_plugin.formats import LoadedModel
from asr_plugin.frontend.online.extractors import buffered_extractor, streaming_extractor

MODES = ("cache_aware", "buffered")
BUFFERED_HINT = "buffered streaming decodes any model (scripts/transcribe.py --buffered, eval.py streaming=buffered)"


@dataclass(frozen=True)
class BufferedWindows:
    """Buffered streaming's windows in milliseconds of audio (defaults: NeMo's
    ``speech_to_text_streaming_infer_rnnt.py``, chunk 2 s, left context 10 s, right context 2 s): each chunk is
    encoded with `left_ms` before it and `right_ms` after it (the latency beyond the chunk)."""

    left_ms: float = 10000.0
    chunk_ms: float = 2000.0
    right_ms: float = 2000.0


@dataclass(frozen=True)
class StreamingMode:
    """How to stream a model.

    Attributes:
        kind: "cache_aware" (a model trained to stream) or "buffered" (any model).
        att_context_size: cache-aware streaming's [left, right] context, one the model was trained with (None: its
            default context).
        windows: buffered streaming's windows.
        endpointing: sherpa-onnx's endpoint rules close segments (their texts are joined; for a microphone's
            endless stream); False, the default for files (eval.py's and transcribe.py's): one segment.
    """

    kind: str = "cache_aware"
    att_context_size: tuple[int, int] | None = None
    windows: BufferedWindows = field(default_factory=BufferedWindows)
    endpointing: bool = False

    def __post_init__(self) -> None:
        if self.kind not in MODES:
            raise ValueError(f"streaming mode {self.kind!r}; choose one of {MODES}")
        if self.kind == "buffered" and self.att_context_size is not None:
            raise ValueError(
                f"att_context_size={list(self.att_context_size)} is cache-aware streaming's: buffered streaming "
                "encodes windows with the model's own context"
            )


@dataclass(frozen=True)
class StreamingLatency:
    """The algorithmic latency of a streaming setup, in milliseconds of audio (compute time not counted).

    Attributes:
        chunk_ms: the audio of one encoder step (the encoder frames it emits).
        lookahead_ms: the audio after a chunk that its step needs too (regular style's recomputed frames,
            buffered streaming's right context; 0 for chunked_limited, whose lookahead lies inside the chunk).
        frontend_ms: the audio after a feature frame's hop that its window needs (the front end's lookahead).
    """

    chunk_ms: float
    lookahead_ms: float
    frontend_ms: float

    @property
    def algorithmic_ms(self) -> float:
        """The longest wait from a sample's arrival to the step that decodes it: the sample that opens a chunk
        waits for the chunk, its lookahead and the last feature window."""
        return self.chunk_ms + self.lookahead_ms + self.frontend_ms


@dataclass
class StreamingSession:
    """A model's recognition session and what it streams with.

    Attributes:
        recognizer: the session (B streams of audio in, partial and final segments out).
        mode: the mode, `att_context_size` resolved to the context used (cache-aware).
        latency: its algorithmic latency.
        sample_rate: the audio's rate.
    """

    recognizer: StreamingRecognizer
    mode: StreamingMode
    latency: StreamingLatency
    sample_rate: int


def context_argument(text: str) -> tuple[int, int]:
    """An attention context given on a command line as ``L,R`` (``--att-context-size 70,13``); argparse's error
    naming the value otherwise."""
    try:
        left, right = (int(side) for side in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give the context as L,R (two integers, e.g. 70,13)") from None
    return left, right


def cache_aware_encoder(loaded: LoadedModel, att_context_size: tuple[int, int] | None) -> CacheAwareEncoder:
    """The cache-aware encoder stream of `loaded` at `att_context_size` (None: its default context); ValueError
    naming the file for a full-context model (offering buffered streaming), a context it was not trained with
    (naming those it was), a full default context, or another reason it cannot stream with caches."""
    encoder = loaded.model.encoder
    contexts = [list(c) for c in getattr(encoder, "att_context_sizes", [(-1, -1)])]
    streamable = [list(c) for c in encoder.streaming_contexts]
    if not streamable:
        raise ValueError(
            f"{loaded.path} is a full-context model (attention context {contexts}): cache-aware streaming needs a "
            f"model trained with a limited context (e.g. model=tiny_streaming); {BUFFERED_HINT}"
        )
    context = tuple(encoder.checked_context(att_context_size))  # names the model's contexts when not one of them
    if context[1] < 0:
        raise ValueError(
            f"{loaded.path}: attention context {list(context)} has an unlimited right context (it is decoded "
            f"offline); cache-aware streaming takes one of the model's streaming contexts {streamable}"
        )
    try:
        return CacheAwareEncoder(loaded.model, list(context))
    except ValueError as err:
        raise ValueError(f"{loaded.path}: {err}; {BUFFERED_HINT}") from None


def _frames(name: str, milliseconds: float, frame_ms: float, multiple: int) -> int:
    """`milliseconds` as feature frames of `frame_ms`, a multiple of `multiple` frames (ValueError naming `name`)."""
    frames = milliseconds / frame_ms
    if not math.isfinite(frames) or milliseconds < 0 or abs(frames - round(frames)) > 1e-6 or round(frames) % multiple:
        raise ValueError(
            f"buffered {name}={milliseconds:g}: must be a multiple of {multiple * frame_ms:g} ms (whole encoder "
            f"frames: {multiple} feature frames of {frame_ms:g} ms)"
        )
    return round(frames)


def build_session(
    loaded: LoadedModel,
    mode: StreamingMode,
    max_symbols_per_frame: int,
    device: torch.device | str = "cpu",
    fusion: FusionSpec = NO_FUSION,
) -> StreamingSession:
    """The streaming session of `loaded` in `mode` on `device`, decoding with `loaded`'s tokenizer and `fusion`'s
    scorers (the recogniser's own: every stream keeps its states); ValueError naming the problem when the model
    or its front end cannot stream that way (see `cache_aware_encoder`)."""
    model, tokenizer, spec = loaded.model, model_tokenizer(loaded), loaded.require_frontend_spec()
    if mode.kind == "cache_aware":
        encoder = cache_aware_encoder(loaded, mode.att_context_size)
        try:
            features = streaming_extractor(spec, device)
        except ValueError as err:
            raise ValueError(
                f"{loaded.path}: {err}; buffered streaming normalises each window instead "
                "(scripts/transcribe.py --buffered, eval.py streaming=buffered)"
            ) from None
        setup = encoder.setup
        mode = StreamingMode(mode.kind, setup.att_context_size, mode.windows, mode.endpointing)
        chunk_frames, lookahead_frames = setup.chunk_frames, setup.cache_drop_size * setup.subsampling_factor
    else:
        features, normalize_window = buffered_extractor(spec, device)
        frame_ms = 1000 * features.frontend.hop_length / features.frontend.sample_rate
        factor = subsampling_factor(model)
        windows = mode.windows
        chunk_frames = _frames("chunk_ms", windows.chunk_ms, frame_ms, factor)
        if chunk_frames == 0:
            raise ValueError(f"buffered chunk_ms={windows.chunk_ms:g} must be positive")
        left_frames = _frames("left_ms", windows.left_ms, frame_ms, factor)
        lookahead_frames = _frames("right_ms", windows.right_ms, frame_ms, 1)
        try:
            encoder = BufferedEncoder(model, chunk_frames, left_frames, lookahead_frames, normalize_window)
        except ValueError as err:
            raise ValueError(f"buffered streaming of {loaded.path} ({windows}): {err}") from None
    frontend = features.frontend
    if features.num_mel_bins != loaded.feature_dim:
        raise ValueError(
            f"{loaded.path}: its front end gives {features.num_mel_bins} bins, its model takes {loaded.feature_dim}"
        )
    frame_ms = 1000 * frontend.hop_length / frontend.sample_rate
    endpointing = None
    if mode.endpointing:
        factor = subsampling_factor(model)
        endpointing = Endpointing(encoder_frame_shift(factor, frontend.hop_length, frontend.sample_rate))
    recognizer = StreamingRecognizer(
        model,
        encoder,
        features=features,
        max_symbols_per_frame=max_symbols_per_frame,
        endpointing=endpointing,
        tokenizer=tokenizer,
        fusion=fusion.scorers(tokenizer),
    )
    latency = StreamingLatency(
        chunk_ms=chunk_frames * frame_ms,
        lookahead_ms=lookahead_frames * frame_ms,
        frontend_ms=1000 * (features.reach - frontend.hop_length) / frontend.sample_rate,
    )
    return StreamingSession(recognizer, mode, latency, frontend.sample_rate)
