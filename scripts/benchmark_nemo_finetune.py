"""Memory and time of one fine-tuning step of a NeMo (Fast)Conformer-RNNT on long utterances, per loss mode.

One step = NeMo front end -> encoder -> predictor -> loss (batched or sample-wise) -> backward, in training
mode, on synthetic audio of --seconds per utterance with --tokens-per-second targets (dropout on, so the
two modes' losses differ by their dropout draws). The model is an
imported ``.nemo`` (--nemo) or, without one, a preset of the same architecture with random weights
(--preset small|medium|large, the NeMo Conformer-Transducer sizes; V = --vocab). Weights do not change
memory or time, so a preset stands in for a downloaded checkpoint of that size.

CPU: each mode runs in a fresh interpreter; memory is the peak RSS above the RSS after the model and inputs
were built and one warm-up step ran (as scripts/benchmark_loss.py measures it), with glibc's malloc told to
map every block over 64 KiB on its own (MALLOC_MMAP_THRESHOLD_), so freed tensors leave the RSS and the
peak is that of live memory, not of what the allocator kept from the warm-up. CUDA: peak allocated memory.

    OMP_NUM_THREADS=2 python scripts/benchmark_nemo_finetune.py --preset small --batch 2 --seconds 20
    python scripts/benchmark_nemo_finetune.py --nemo stt_en_conformer_transducer_large.nemo --device cuda --batch 8 --seconds 35
"""

from __future__ import annotations

import argparse
import json

from asr_plugin.benchmarks.nemo_finetune import MODES, measure, table


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
    main()
