"""Exports a trained checkpoint for inference: ``python scripts/export_model.py --checkpoint X --out exp/export``.

Writes encoder.pt2, predictor.pt2 and joint.pt2 (``torch.export`` programs with dynamic batch and
time axes) plus transducer.json, the directory written whole (an earlier export there is replaced only with
--overwrite, nothing of it left behind; export_record.json names the model's and every file's hash); load
them with ``asr_plugin.export.ExportedTransducer.load`` and decode with ``greedy_search``/``beam_search`` (see docs/decoding.md). The feature size is the
checkpoint's (its model's ``input_dim``); transducer.json records the checkpoint's greedy
``max_symbols_per_frame`` (what its validation and eval.py decode with). The checkpoint is only read.
"""

from __future__ import annotations

import argparse
import os
import sys

from asr_plugin.export import export_transducer
from asr_plugin.formats import read_model
from asr_plugin.user_errors import exit_on_user_error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a .ckpt file or a directory of them")
    parser.add_argument("--avg", type=int, default=1, help="export the average of the last N checkpoints")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing export in --out")
    args = parser.parse_args(argv)
    loaded = read_model(args.checkpoint, args.avg)
    symbols = loaded.decoding["max_symbols_per_frame"]
    paths = export_transducer(
        loaded.model,
        args.out,
        loaded.feature_dim,
        overwrite=args.overwrite,
        max_symbols_per_frame=symbols,
        source=os.path.abspath(args.checkpoint),
    )
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(exit_on_user_error()(main)())
