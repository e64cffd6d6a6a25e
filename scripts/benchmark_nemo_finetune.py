"""Memory and time of one fine-tuning step of a NeMo (Fast)Conformer-RNNT on long utterances, per loss mode: a
table on stdout. What is measured, and how, is `benchmarks.nemo_finetune`'s docstring.

    OMP_NUM_THREADS=2 python scripts/benchmark_nemo_finetune.py --preset small --batch 2 --seconds 20
    python scripts/benchmark_nemo_finetune.py --nemo stt_en_conformer_transducer_large.nemo --device cuda --batch 8 --seconds 35
"""

from __future__ import annotations

import argparse
import json

from asr_plugin.user_errors import exit_on_user_error
from benchmarks.nemo_finetune import MODES, measure, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nemo", help="a .nemo file (default: --preset with random weights)")
    parser.add_argument("--preset", choices=("small", "medium", "large"), default="small")
    parser.add_argument("--vocab", type=int, default=1025, help="preset only: output size with the blank")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--tokens-per-second", type=float, default=4.0)
    parser.add_argument("--memory-budget", default=None, help="sample-wise budget, e.g. 256MiB")
    parser.add_argument("--modes", default=",".join(MODES))
    args = vars(parser.parse_args())
    rows = []
    for mode in args["modes"].split(","):
        rows.append(measure(args, mode))
        print(json.dumps(rows[-1]), flush=True)
    print("\n" + table(rows, args))


if __name__ == "__main__":
    exit_on_user_error()(main)()
