"""Run a Python script with TF32 matrix products allowed, as a user who allows them does.

``torch.backends.cuda.matmul.allow_tf32 = True`` is set in this process before the script runs (the
script itself, e.g. ``scripts/benchmark_loss.py``, is unchanged and runs as ``__main__``); afterwards the
setting must still be on: the loss follows the user's setting and never changes it, and a script or loss
that switched it off fails this command.

    python -m gpucheck.tf32 scripts/benchmark_loss.py --device cuda --preset paper --dtype fp32
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import torch


def run_with_tf32(script: Path, args: list[str]) -> None:
    """Runs `script` with `args` as its command line and TF32 allowed; raises if the setting was changed."""
    if not script.is_file():
        raise FileNotFoundError(f"script {script} does not exist")
    torch.backends.cuda.matmul.allow_tf32 = True
    argv = sys.argv
    sys.argv = [str(script), *args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    if not torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError(f"{script} (or the loss) switched torch.backends.cuda.matmul.allow_tf32 off")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if argv else 2)
    run_with_tf32(Path(argv[0]), argv[1:])
    print("torch.backends.cuda.matmul.allow_tf32 was on during the run and is still on")


if __name__ == "__main__":
    main()
