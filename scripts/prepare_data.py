#!/usr/bin/env python
"""Prepares the data of a training configuration: manifests, tokenizer and feature statistics, written to
data.work_dir (never into the corpus). The configuration is composed as recipes/librispeech/train.py composes
it, from the same overrides, so training finds exactly what this makes.

    python scripts/prepare_data.py [--steps manifests,tokenizer,stats] [--download] [--num-workers N]
        [--strict] [--overwrite] [--full-check] [HYDRA OVERRIDES ...]
    python scripts/prepare_data.py data=librispeech paths.data_dir=/data data.work_dir=/shared/asr/librispeech
    python scripts/prepare_data.py --steps manifests --download data=librispeech   # fetch LibriSpeech first
    python scripts/prepare_data.py data=nemo 'data.train_manifests=[/data/a.json]' 'data.valid_manifests=[/data/b.json]'
    python scripts/prepare_data.py data=lhotse 'data.train_cuts=[/data/train.jsonl.gz]' 'data.valid_cuts=[/data/dev.jsonl.gz]'

Steps (run.sh stages 0, 1 and 2): manifests (unusable files or manifest lines are printed and listed in
<work_dir>/<split>.skipped.tsv, or refused with --strict), tokenizer, stats. Existing files are reused unless
--overwrite. See docs/data.md.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from asr_plugin.data import PREPARE_STEPS, prepare_corpus
from asr_plugin.user_errors import exit_on_user_error

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of conf/train.yaml, as for train.py")
    parser.add_argument(
        "--steps",
        default=",".join(PREPARE_STEPS),
        help=f"comma-separated, in order (default: {','.join(PREPARE_STEPS)})",
    )
    parser.add_argument("--download", action="store_true", help="fetch missing LibriSpeech splits from OpenSLR first")
    parser.add_argument(
        "--num-workers", type=int, default=os.cpu_count() or 1, help="processes checking audio and computing statistics"
    )
    parser.add_argument("--strict", action="store_true", help="refuse unusable audio instead of leaving it out")
    parser.add_argument("--overwrite", action="store_true", help="rebuild what exists")
    parser.add_argument("--full-check", action="store_true", help="decode all audio, not only headers")
    args = parser.parse_args(argv)
    os.environ.setdefault("PROJECT_ROOT", str(CONF_DIR.parent))  # paths.root_dir, as train.py sets it
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=args.overrides)
    datamodule = instantiate(cfg.data)
    prepare_corpus(
        datamodule.plan,
        [step for step in args.steps.split(",") if step],
        num_workers=args.num_workers,
        download=args.download,
        strict=args.strict,
        overwrite=args.overwrite,
        full_check=args.full_check,
    )


if __name__ == "__main__":
    exit_on_user_error()(main)()
