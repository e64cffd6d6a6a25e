"""Trains the NeMo-trained reference models of the tests marked nemo once, with NeMo itself, and writes their
``.nemo`` files into the repository (tests/nemo_references/<name>/), so that no test run trains NeMo again.

    python scripts/make_nemo_references.py                 # all: full-context, cache-aware streaming, TDT
    python scripts/make_nemo_references.py --only streaming --work-dir /tmp/nemo_refs

Needs NeMo (the nemo extra, in its own venv: docs/finetune.md). What it trains is `benchmarks.nemo_reference`'s
`COMMITTED_REFERENCES` (`ReferenceSettings()`, `StreamingReferenceSettings()`, `TDTReferenceSettings()`: corpus,
tokenizer, sizes, steps, seed); each folder also gets ``settings.json``, those settings with their key. The tests rebuild the rest from the settings (the
corpus is a function of its seed, NeMo's transcripts are recomputed) and fail, naming this script, when the
settings in the code are no longer those the committed models were trained with
(`benchmarks.nemo_reference.committed_reference`). NeMo's CPU training is seeded but its float sums depend on the
CPU, so a rerun gives close, not identical, weights: commit what it wrote.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.nemo_reference import COMMITTED_REFERENCES, cached_reference, commit_reference


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(COMMITTED_REFERENCES), help="make only this reference")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path("nemo_reference_work"),
        help="where the corpus and the training go (reused when rerun; default: ./nemo_reference_work)",
    )
    args = parser.parse_args(argv)
    for name in [args.only] if args.only else COMMITTED_REFERENCES:
        settings = COMMITTED_REFERENCES[name]
        reference = cached_reference(args.work_dir, settings)
        print(f"{name}: {commit_reference(reference, name)} (NeMo's WER {reference.wer})")


if __name__ == "__main__":
    main()
