"""Latency and speed of cache-aware streaming per lookahead, and memory over a 10-minute stream: a Markdown table on
stdout. What is measured is `benchmarks.streaming`'s docstring (docs/streaming.md, "Latency and speed").

    python scripts/benchmark_streaming.py CHECKPOINT_OR_NEMO data/manifests/test.jsonl
    python scripts/benchmark_streaming.py CHECKPOINT_OR_NEMO a.wav b.wav --att-context-size 70,13
    python scripts/benchmark_streaming.py --quick     # a tiny random model: the table's shape, in seconds
"""

from __future__ import annotations

import argparse
import sys

from asr_plugin.evaluation.streaming_session import context_argument
from asr_plugin.user_errors import exit_on_user_error
from benchmarks.streaming import benchmark_streaming, quick_benchmark, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", nargs="?", help="a .ckpt file, a directory of them, or a .nemo file")
    parser.add_argument("inputs", nargs="*", help="a manifest (JSON lines with transcripts) or audio files")
    parser.add_argument(
        "--att-context-size",
        type=context_argument,
        action="append",
        metavar="L,R",
        help="a context to measure (repeatable; default: every context the model streams with)",
    )
    parser.add_argument("--memory-seconds", type=float, default=600.0, help="the memory stream's length (0: none)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--limit", type=int, default=None, help="stream only the first N utterances")
    parser.add_argument("--quick", action="store_true", help="a tiny random model on synthetic audio (no arguments)")
    args = parser.parse_args(argv)
    if args.quick:
        if args.source or args.inputs:
            parser.error("--quick builds its own model and audio: give no model file or inputs")
        print(table(quick_benchmark()))
        return 0
    if not args.source or not args.inputs:
        parser.error("give a model file and a manifest or audio files (or --quick)")
    result = benchmark_streaming(
        args.source, args.inputs, args.att_context_size, args.memory_seconds, args.threads, args.limit
    )
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(exit_on_user_error()(main)())
