"""Writes a model file (a training checkpoint, a directory of them, a `.nemo`: any that `asr_plugin.formats`
reads as a whole model) as a NeMo 3.0 `.nemo` file that ``nemo.collections.asr.models.ASRModel.restore_from``
loads; NeMo is not needed to write it (`asr_plugin.formats.nemo.writer`, docs/finetune.md "Back to NeMo").

    python scripts/export_nemo.py logs/train/runs/<run>/checkpoints/last.ckpt finetuned.nemo
    python scripts/export_nemo.py model.nemo again.nemo                 # a .nemo imported and written again
    python scripts/export_nemo.py run/checkpoints/last.ckpt exported/  # a directory: writes exported/last.nemo
    python scripts/export_nemo.py run/checkpoints averaged.nemo --avg 5  # the average of the run's last 5
"""

from __future__ import annotations

import argparse

from asr_plugin.formats import export_nemo, read_model
from asr_plugin.formats.nemo.output_path import nemo_output_path
from asr_plugin.user_errors import exit_on_user_error


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a training checkpoint (.ckpt), a directory of them, or a .nemo file")
    parser.add_argument(
        "output",
        help="the .nemo file to write (replaced if it exists), or a directory to write <source stem>.nemo into",
    )
    parser.add_argument("--avg", type=int, default=1, help="export the average of the last N checkpoints")
    args = parser.parse_args(argv)
    output = nemo_output_path(args.source, args.output)
    path = export_nemo(read_model(args.source, args.avg), output)
    print(f"{path}  {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    exit_on_user_error()(main)()
