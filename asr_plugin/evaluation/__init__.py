"""Evaluation: decoding of test sets, offline or as streams, recogs/errs files and WER summaries, transcription of
files, offline or as streams (models read through `asr_plugin.formats`)."""

from asr_plugin.evaluation.decode_sets import decode_batches, format_table, write_set_results, write_summary
from asr_plugin.evaluation.run import evaluate
from asr_plugin.evaluation.scoring import ErrorCounts, Recognition, score, write_errs, write_recogs
from asr_plugin.evaluation.streaming_session import (
    BufferedWindows,
    StreamingLatency,
    StreamingMode,
    StreamingSession,
    build_session,
)
from asr_plugin.evaluation.streaming_transcriber import StreamingTranscriber

__all__ = [
    "BufferedWindows",
    "ErrorCounts",
    "Recognition",
    "StreamingLatency",
    "StreamingMode",
    "StreamingSession",
    "StreamingTranscriber",
    "build_session",
    "decode_batches",
    "evaluate",
    "format_table",
    "score",
    "write_errs",
    "write_recogs",
    "write_set_results",
    "write_summary",
]
