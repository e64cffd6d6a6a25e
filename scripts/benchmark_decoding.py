"""WER and utterances/s of greedy and beam search (beams 1, 4, 8), ours and NeMo's (when NeMo is importable and the
model is a .nemo), decoding time only: a Markdown table on stdout (docs/decoding.md, "Speed and accuracy";
`benchmarks.decoding` says what is measured).

    python scripts/benchmark_decoding.py rnnt.nemo tdt.nemo --manifest data/manifests/test.jsonl --threads 8
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
    parser.add_argument("--manifest", required=True, help="a manifest (JSON lines with transcripts)")
    parser.add_argument("--batch-size", type=int, default=16, help="utterances decoded together (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads, the same for both (default 1)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N utterances")
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.threads < 1:
        parser.error("--batch-size and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    rows = []
    for path in args.models:
        try:
            rows += benchmark_model(path, args.manifest, args.batch_size, args.limit)
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
