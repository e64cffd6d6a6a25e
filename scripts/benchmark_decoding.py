"""WER and utterances/s of greedy and beam search (beams 1, 4, 8), ours and, with --nemo, NeMo's on the same .nemo,
decoding time only, side by side in one process: a Markdown table on stdout (docs/decoding.md, "Speed and
accuracy"; `benchmarks.decoding` says what is measured).

    python scripts/benchmark_decoding.py rnnt.nemo tdt.nemo --manifest test.json --nemo --threads 1
    python scripts/benchmark_decoding.py --nemo-reference /tmp/refs --nemo-example fast_conformer_tdt --nemo
    python scripts/benchmark_decoding.py --nemo-reference /tmp/refs --reference tdt --nemo
    python scripts/benchmark_decoding.py exp/run/checkpoints --manifest data/manifests/test.jsonl --batch-size 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.decoding import benchmark_model, table

NEEDS_NEMO = "pip install 'nemo_toolkit[asr]'; the NeMo venv of the tests has it"


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", help="model files: .ckpt, a directory of them, or .nemo")
    parser.add_argument(
        "--manifest",
        action="append",
        default=[],
        help="our manifest or NeMo's (JSON lines with transcripts); repeat for more",
    )
    parser.add_argument(
        "--nemo-reference",
        metavar="DIR",
        help="also a committed NeMo-trained reference (tests/nemo_references/<--reference>), its corpus rebuilt in "
        "DIR/<--reference> (reused when there), on its dev and test manifests (needs NeMo)",
    )
    parser.add_argument(
        "--reference",
        choices=["full_context", "tdt"],
        default="full_context",
        help="which one --nemo-reference adds: the RNN-T (default) or the TDT FastConformer",
    )
    parser.add_argument(
        "--nemo-example",
        action="append",
        default=[],
        choices=["fast_conformer_transducer", "fast_conformer_tdt"],
        help="also NeMo's example model of that name, random weights sharpened (speed only; needs NeMo)",
    )
    parser.add_argument("--batch-size", type=int, default=16, help="utterances decoded together (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads, the same for both (default 1)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N utterances")
    parser.add_argument("--nemo", action="store_true", help="NeMo's greedy_batch and malsd_batch beside ours")
    parser.add_argument(
        "--score-norm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="beam search on both sides chooses by score / (tokens + 1), NeMo's and our default (default: on)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs of each method; the fastest counts (default 3)")
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.threads < 1 or args.repeats < 1:
        parser.error("--batch-size, --threads and --repeats must be >= 1")
    if not (args.models or args.nemo_example or args.nemo_reference):
        parser.error("name a model file, --nemo-example or --nemo-reference")
    if not (args.manifest or args.nemo_reference):
        parser.error("--manifest is needed (--nemo-reference brings its own)")
    if args.nemo or args.nemo_example or args.nemo_reference:
        try:
            import nemo.collections.asr  # noqa: F401
        except ImportError:
            parser.error(f"--nemo, --nemo-example and --nemo-reference need NeMo ({NEEDS_NEMO})")
    args.error = parser.error
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    torch.set_num_threads(args.threads)
    if args.nemo_reference:
        from benchmarks.nemo_reference import EVAL_SPLITS, committed_reference

        reference = committed_reference(Path(args.nemo_reference) / args.reference, args.reference)
        args.models.insert(0, str(reference.models["rnnt"]))
        args.manifest += [str(reference.manifests[split]) for split in EVAL_SPLITS]
    rows = []
    with tempfile.TemporaryDirectory() as examples:
        if args.nemo_example:
            from benchmarks.nemo_decoding import save_sharpened_example

            args.models += [str(save_sharpened_example(name, examples)) for name in args.nemo_example]
        for path in args.models:
            try:
                rows += benchmark_model(
                    path, args.manifest, args.batch_size, args.limit, args.nemo, args.repeats, args.score_norm
                )
            except (FileNotFoundError, ValueError) as err:
                args.error(str(err))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
