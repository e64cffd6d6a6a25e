"""WER and RTF of greedy search against sherpa-onnx (float and int8) on a test set: a Markdown table on stdout.
What is measured is `benchmarks.onnx`'s docstring.

    OMP_NUM_THREADS=1 python scripts/benchmark_onnx.py CHECKPOINT data/manifests/test.jsonl --out exp/sherpa
    OMP_NUM_THREADS=1 python scripts/benchmark_onnx.py CHECKPOINT data/manifests/test.jsonl --out exp/online --streaming

With --streaming (a cache-aware model on the "sherpa_online" front end): our streaming recogniser against
sherpa-onnx's online recogniser fed 100 ms pieces, per lookahead (--att-context-size L,R, else every one).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from asr_plugin.evaluation.streaming_session import context_argument
from asr_plugin.user_errors import exit_on_user_error
from benchmarks.onnx import benchmark_onnx, benchmark_onnx_streaming, table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="a .ckpt file, a directory of them, or a .nemo file")
    parser.add_argument(
        "manifest", help="the test set's manifest: JSON lines of this project (id, path, duration, text) or NeMo's"
    )
    parser.add_argument("--out", required=True, help="export directory (exported there unless it already holds one)")
    parser.add_argument("--threads", type=int, default=1, help="threads of both runtimes")
    parser.add_argument("--limit", type=int, default=None, help="decode only the first N utterances")
    parser.add_argument("--streaming", action="store_true", help="sherpa-onnx's online recogniser (OUT/<L>_<R>/)")
    parser.add_argument(
        "--att-context-size",
        type=context_argument,
        metavar="L,R",
        help="with --streaming: the one lookahead to measure",
    )
    parser.add_argument(
        "--pause-after",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="silence after every utterance's audio, for every method (a live stream's pause after speech)",
    )
    args = parser.parse_args(argv)
    if args.pause_after < 0:
        parser.error(f"--pause-after must be >= 0 seconds, not {args.pause_after}")
    if args.att_context_size and not args.streaming:
        parser.error("--att-context-size needs --streaming")
    if args.streaming:
        rows = benchmark_onnx_streaming(
            args.source, args.manifest, args.out, args.att_context_size, args.threads, args.limit, args.pause_after
        )
    else:
        rows = benchmark_onnx(args.source, args.manifest, args.out, args.threads, args.limit, args.pause_after)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(exit_on_user_error()(main)())
