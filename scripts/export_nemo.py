"""Writes a training checkpoint (or a `.nemo` imported and re-exported) as a NeMo 3.0 `.nemo` file that
``nemo.collections.asr.models.ASRModel.restore_from`` loads; NeMo is not needed to write it
(`asr_plugin.finetune.nemo.export`, docs/finetune.md "Back to NeMo").

    python scripts/export_nemo.py logs/train/runs/<run>/checkpoints/last.ckpt finetuned.nemo
    python scripts/export_nemo.py --nemo model.nemo again.nemo     # import_nemo, then export_nemo
    python scripts/export_nemo.py run/checkpoints/last.ckpt exported/  # a directory: writes exported/last.nemo
"""

from __future__ import annotations

import argparse

from asr_plugin.finetune.nemo import import_nemo
from asr_plugin.finetune.nemo.export import export_nemo
from asr_plugin.finetune.nemo.output_path import nemo_output_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a training checkpoint (.ckpt), or with --nemo a .nemo file")
    parser.add_argument(
        "output",
        help="the .nemo file to write (replaced if it exists), or a directory to write <source stem>.nemo into",
    )
    parser.add_argument("--nemo", action="store_true", help="source is a .nemo file: import it and export it again")
    args = parser.parse_args()
    output = nemo_output_path(args.source, args.output)
    path = export_nemo(import_nemo(args.source) if args.nemo else args.source, output)
    print(f"{path}  {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
