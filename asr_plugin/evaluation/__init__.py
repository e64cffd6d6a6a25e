"""Evaluation: decoding of test sets, recogs/errs files and WER summaries, transcription (models read through
`asr_plugin.formats`)."""

from asr_plugin.evaluation.decode_sets import decode_batches, format_table, write_set_results, write_summary
from asr_plugin.evaluation.run import evaluate
from asr_plugin.evaluation.scoring import ErrorCounts, Recognition, score, write_errs, write_recogs

__all__ = [
    "ErrorCounts",
    "Recognition",
    "decode_batches",
    "evaluate",
    "format_table",
    "score",
    "write_errs",
    "write_recogs",
    "write_set_results",
    "write_summary",
]
