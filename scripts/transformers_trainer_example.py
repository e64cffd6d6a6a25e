"""docs/transformers.md's `Trainer` example run for real on the mini corpus (no hub: a small Parakeet from
transformers' config classes, random weights; transformers' tokenizer.json of a SentencePiece model of the
training text): transformers' own loss and the sample-wise one, seed by seed, the dev WER every --eval-steps and
the training loss logged there (`benchmarks.transformers_trainer`). Needs the transformers extra.

    OMP_NUM_THREADS=1 python scripts/transformers_trainer_example.py --corpus /tmp/mini --steps 1200
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
    parser.add_argument(
        "--train-engines",
        nargs="+",
        choices=["espeak", "piper"],
        default=["espeak", "piper"],
        help="the corpus' training speech (espeak alone synthesises in seconds)",
    )
    parser.add_argument("--kinds", default="rnnt,tdt", help="ParakeetForRNNT and/or ParakeetForTDT")
    parser.add_argument("--seeds", default="0,1", help="the runs' seeds (initial weights, data order, dropout)")
    parser.add_argument("--losses", default="transformers,samplewise", help="transformers' own, the sample-wise")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps of 8 utterances")
    parser.add_argument("--pieces", type=int, default=64, help="SentencePiece pieces (the blank comes on top)")
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="peak, after warm-up on a tenth")
    parser.add_argument("--eval-steps", type=int, default=200, help="dev WER and training loss every this many")
    args = parser.parse_args(argv)
    if args.eval_steps < 1 or args.steps < 1:
        parser.error("--steps and --eval-steps must be >= 1")
    make_mini_librispeech(
        args.corpus, n_train=args.n_train, n_dev=args.n_dev, n_test=1, train_engines=args.train_engines, progress=False
    )
    results = run_example(
        args.corpus,
        args.kinds.split(","),
        [int(s) for s in args.seeds.split(",")],
        dict(steps=args.steps, learning_rate=args.learning_rate, eval_steps=args.eval_steps),
        args.pieces,
        args.losses.split(","),
    )
    print(f"\n{'kind':<5} {'loss':<13} {'seed':>4}  dev WER at steps 0, {args.eval_steps}, ... / training loss there")
    for r in results:
        wers = " ".join(f"{wer:.1%}" for _, wer in r["curve"])
        losses = " ".join(f"{value:.2f}" for value in r["losses"])
        print(f"{r['kind']:<5} {r['loss']:<13} {r['seed']:>4}  {wers} / {losses}")


if __name__ == "__main__":
    main()
