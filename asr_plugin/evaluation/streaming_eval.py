"""Scoring test sets as streams (``eval.py streaming=true``, ``streaming=buffered``; conf/eval.yaml): every
utterance's audio is fed in pieces to the model's streaming session (`asr_plugin.evaluation.streaming_session`),
several utterances as a batch of streams, and its final text is scored as offline evaluation scores its
hypotheses, into the same recogs/errs/wer-summary files, each row saying its mode, context and latency.

``att_context_size=all`` scores a multi-lookahead model at every context it was trained with in one command: each
limited one streamed (cache-aware), and a full context ``[-1, -1]`` among them decoded offline (the full-context
WER of the same model; any context with an unlimited right context is decoded offline at that context).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from asr_plugin.data.sources.manifest import ManifestEntry
from asr_plugin.evaluation.decode_sets import SetResult
from asr_plugin.evaluation.fusion_spec import NO_FUSION, FusionSpec
from asr_plugin.evaluation.scoring import Recognition
from asr_plugin.evaluation.streaming_session import (
    BufferedWindows,
    StreamingMode,
    StreamingSession,
    build_session,
)
from asr_plugin.evaluation.streaming_transcriber import piece_samples, stream_waveforms
from asr_plugin.formats import LoadedModel

log = logging.getLogger(__name__)
ALL_CONTEXTS = "all"
STREAMING_VALUES = (False, True, "buffered")
STREAM_BATCH_SIZE = 16  # utterances streamed together (conf/eval.yaml's stream.batch_size)


@dataclass(frozen=True)
class EvalRun:
    """One decoding of every set: streamed in `mode`, or offline (`mode` None) at `att_context_size`."""

    mode: StreamingMode | None
    att_context_size: tuple[int, int] | None = None

    @property
    def tag(self) -> str:
        """Its part of the result files' names: ``streaming-L-R``, ``buffered``, ``offline-full`` or
        ``offline-L-R``."""
        if self.mode is None:
            left, right = self.att_context_size
            return "offline-full" if (left, right) == (-1, -1) else f"offline-{left}-{right}"
        if self.mode.kind == "buffered":
            return "buffered"
        left, right = self.mode.att_context_size
        return f"streaming-{left}-{right}"


def _context(value: Any) -> tuple[int, int]:
    pair = list(value)
    if len(pair) != 2 or not all(isinstance(side, int) and not isinstance(side, bool) for side in pair):
        raise ValueError(f"att_context_size={value!r}: give [left, right] (two integers), null or {ALL_CONTEXTS}")
    return pair[0], pair[1]


def eval_runs(streaming: Any, att_context_size: Any, stream: Mapping[str, Any], loaded: LoadedModel) -> list[EvalRun]:
    """The decodings that ``streaming`` (true, buffered), ``att_context_size`` (null, [L, R], all) and the
    ``stream`` options ask for; ValueError naming the key for a value that does not apply."""
    if streaming not in STREAMING_VALUES or streaming is False:
        raise ValueError(f"streaming={streaming!r}: choose true (cache-aware) or buffered (false decodes offline)")
    endpointing = bool(stream.get("endpointing", False))
    if streaming == "buffered":
        if att_context_size is not None:
            raise ValueError(
                f"att_context_size={att_context_size!r} is cache-aware streaming's (streaming=true): buffered "
                "streaming encodes windows with the model's own context"
            )
        windows = BufferedWindows(**dict(stream.get("buffered") or {}))
        return [EvalRun(StreamingMode("buffered", None, windows, endpointing))]
    if att_context_size != ALL_CONTEXTS:
        default = getattr(loaded.model.encoder, "att_context_size", (-1, -1))
        context = _context(default if att_context_size is None else att_context_size)
        return [EvalRun(StreamingMode("cache_aware", context, endpointing=endpointing))]
    streamable = loaded.model.encoder.streaming_contexts
    runs = [EvalRun(StreamingMode("cache_aware", context, endpointing=endpointing)) for context in streamable]
    if not runs:  # a full-context model: `build_session` says so and offers buffered streaming
        return [EvalRun(StreamingMode("cache_aware", (-1, -1), endpointing=endpointing))]
    offline = [tuple(c) for c in loaded.model.encoder.att_context_sizes if tuple(c) not in streamable]
    return runs + [EvalRun(None, context) for context in offline]


def run_fields(run: EvalRun, session: StreamingSession | None) -> dict[str, Any]:
    """A summary row's `asr_plugin.evaluation.decode_sets.RUN_COLUMNS` of `run`."""
    if session is None:
        return {"mode": "offline", "att_context_size": list(run.att_context_size), "chunk_ms": "", "latency_ms": ""}
    context = session.mode.att_context_size
    return {
        "mode": session.mode.kind,
        "att_context_size": "" if context is None else list(context),
        "chunk_ms": round(session.latency.chunk_ms, 1),
        "latency_ms": round(session.latency.algorithmic_ms, 1),
    }


def describe_run(run: EvalRun, session: StreamingSession | None) -> dict[str, Any]:
    """What the summary's JSON records of a run beyond its rows: the streaming options it ran with."""
    if session is None:
        return {"tag": run.tag, "mode": "offline", "att_context_size": list(run.att_context_size)}
    mode, latency = session.mode, session.latency
    return {
        "tag": run.tag,
        "mode": mode.kind,
        "att_context_size": None if mode.att_context_size is None else list(mode.att_context_size),
        "buffered_windows_ms": asdict(mode.windows) if mode.kind == "buffered" else None,
        "endpointing": mode.endpointing,
        "chunk_ms": latency.chunk_ms,
        "lookahead_ms": latency.lookahead_ms,
        "frontend_lookahead_ms": latency.frontend_ms,
        "algorithmic_latency_ms": latency.algorithmic_ms,
    }


def stream_set(
    session: StreamingSession,
    entries: Sequence[ManifestEntry],
    piece_ms: float,
    batch_size: int,
    device: torch.device | str = "cpu",
) -> SetResult:
    """The final texts of `entries` (transcripts normalised: the references) streamed `batch_size` at a time (by
    duration), in pieces of `piece_ms`; timed from the first piece to the last text."""
    if batch_size < 1:
        raise ValueError(f"stream.batch_size={batch_size} must be >= 1")
    piece = piece_samples(piece_ms, session.sample_rate)
    result = SetResult()
    ordered = sorted(entries, key=lambda entry: entry.duration)
    for start in range(0, len(ordered), batch_size):
        group = ordered[start : start + batch_size]
        waveforms = [entry.load_audio(session.sample_rate) for entry in group]
        began = time.perf_counter()
        texts = stream_waveforms(session, waveforms, piece, device)
        result.decode_seconds += time.perf_counter() - began
        result.audio_seconds += sum(waveform.shape[0] for waveform in waveforms) / session.sample_rate
        result.recognitions += [Recognition(entry.id, entry.text, text) for entry, text in zip(group, texts)]
    return result


def sessions(
    runs: Sequence[EvalRun],
    loaded: LoadedModel,
    max_symbols_per_frame: int,
    device: torch.device | str,
    fusion: FusionSpec = NO_FUSION,
) -> list[StreamingSession | None]:
    """Each run's session (None for an offline run) with `fusion`, all built before any set is decoded, so that a
    mode the model cannot stream in is refused before anything runs."""
    return [
        None if run.mode is None else build_session(loaded, run.mode, max_symbols_per_frame, device, fusion)
        for run in runs
    ]
