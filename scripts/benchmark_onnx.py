"""WER and RTF of greedy search against sherpa-onnx (float and int8) on a test set: a Markdown table on stdout.
What is measured is `benchmarks.onnx`'s docstring.

    OMP_NUM_THREADS=1 python scripts/benchmark_onnx.py CHECKPOINT data/manifests/test.jsonl --out exp/sherpa
"""

from __future__ import annotations

import argparse

from benchmarks.onnx import benchmark_onnx, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="a .ckpt file, a directory of them, or a .nemo file")
    parser.add_argument("manifest", help="the test set's manifest (JSON lines: id, path, duration, text)")
    parser.add_argument("--out", required=True, help="export directory (exported there unless it already holds one)")
    parser.add_argument("--threads", type=int, default=1, help="threads of both runtimes")
    parser.add_argument("--limit", type=int, default=None, help="decode only the first N utterances")
    args = parser.parse_args()
    print(table(benchmark_onnx(args.source, args.manifest, args.out, args.threads, args.limit)))


if __name__ == "__main__":
    main()
