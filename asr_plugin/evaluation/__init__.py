"""Evaluation: checkpoint selection and averaging, decoding of test sets, recogs/errs files and WER summaries."""

from asr_plugin.evaluation.checkpoints import average_state_dicts, checkpoint_order, load_model, select_checkpoints
from asr_plugin.evaluation.decode_sets import decode_batches, format_table, write_set_results, write_summary
from asr_plugin.evaluation.run import evaluate
from asr_plugin.evaluation.scoring import ErrorCounts, Recognition, score, write_errs, write_recogs

__all__ = [
    "ErrorCounts",
    "Recognition",
    "average_state_dicts",
    "checkpoint_order",
    "decode_batches",
    "evaluate",
    "format_table",
    "load_model",
    "score",
    "select_checkpoints",
    "write_errs",
    "write_recogs",
    "write_set_results",
    "write_summary",
]
