"""docs/transformers.md's `Trainer` example run for real on the mini corpus (no hub: a small Parakeet from
transformers' config classes, random weights; transformers' tokenizer.json of a SentencePiece model of the
training text): transformers' own loss and the sample-wise one, seed by seed, dev WER before and after and the
logged training losses (`benchmarks.transformers_trainer`). Needs the transformers extra.

    OMP_NUM_THREADS=1 python scripts/transformers_trainer_example.py --corpus /tmp/mini --steps 300
"""

from __future__ import annotations

import argparse
from pathlib import Path

from asr_plugin.data import make_mini_librispeech
from benchmarks.transformers_trainer import run_example


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True, help="the mini corpus' directory (made if missing)")
    parser.add_argument("--n-train", type=int, default=400, help="training utterances of the corpus made")
    parser.add_argument("--n-dev", type=int, default=40, help="dev utterances of the corpus made")
    parser.add_argument("--kinds", default="rnnt,tdt", help="ParakeetForRNNT and/or ParakeetForTDT")
    parser.add_argument("--seeds", default="0,1", help="the runs' seeds (initial weights, data order, dropout)")
    parser.add_argument("--losses", default="transformers,samplewise", help="transformers' own, the sample-wise")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps of 8 utterances")
    parser.add_argument("--pieces", type=int, default=64, help="SentencePiece pieces (the blank comes on top)")
    args = parser.parse_args(argv)
    make_mini_librispeech(args.corpus, n_train=args.n_train, n_dev=args.n_dev, n_test=1, progress=False)
    results = run_example(
        args.corpus,
        args.kinds.split(","),
        [int(s) for s in args.seeds.split(",")],
        args.steps,
        args.pieces,
        args.losses.split(","),
    )
    print(f"\n{'kind':<5} {'loss':<13} {'seed':>4} {'dev WER before':>15} {'after':>8}  training losses (every tenth)")
    for r in results:
        curve = " ".join(f"{value:.2f}" for value in r["losses"])
        print(f"{r['kind']:<5} {r['loss']:<13} {r['seed']:>4} {r['before']:>15.1%} {r['after']:>8.1%}  {curve}")


if __name__ == "__main__":
    main()
