"""WER and utterances/s of greedy and beam search (beams 1, 4, 8), ours and, with --nemo, NeMo's on the same .nemo,
decoding time only, side by side in one process: a Markdown table on stdout (docs/decoding.md, "Speed and
accuracy"; `benchmarks.decoding` says what is measured).

    python scripts/benchmark_decoding.py rnnt.nemo tdt.nemo --manifest test.json --nemo --threads 1
    python scripts/benchmark_decoding.py exp/run/checkpoints --manifest data/manifests/test.jsonl --batch-size 1
"""

from __future__ import annotations

import argparse
import sys

import torch

from benchmarks.decoding import benchmark_model, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help="model files: .ckpt, a directory of them, or .nemo")
    parser.add_argument("--manifest", required=True, help="our manifest or NeMo's (JSON lines with transcripts)")
    parser.add_argument("--batch-size", type=int, default=16, help="utterances decoded together (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads, the same for both (default 1)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N utterances")
    parser.add_argument("--nemo", action="store_true", help="NeMo's greedy_batch and malsd_batch beside ours")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each method; the fastest counts (default 3)")
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.threads < 1 or args.repeats < 1:
        parser.error("--batch-size, --threads and --repeats must be >= 1")
    if args.nemo:
        try:
            import nemo.collections.asr  # noqa: F401
        except ImportError:
            parser.error("--nemo needs NeMo (pip install 'nemo_toolkit[asr]'; the NeMo venv of the tests has it)")
    torch.set_num_threads(args.threads)
    rows = []
    for path in args.models:
        try:
            rows += benchmark_model(path, args.manifest, args.batch_size, args.limit, args.nemo, args.repeats)
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
