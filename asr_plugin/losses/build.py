"""Ahead-of-time build of the loss extension, for clusters and CI: build once, then every job loads it.

    python -m asr_plugin.losses.build                  # CPU library into the cache ($TORCH_EXTENSIONS_DIR/asr_plugin)
    python -m asr_plugin.losses.build --cuda           # CPU and CUDA libraries
    python -m asr_plugin.losses.build --out /shared/asr_plugin_ext --cuda
    export ASR_PLUGIN_EXTENSION_DIR=/shared/asr_plugin_ext   # jobs load from there and never build

Prints one line per library: its kind, path and whether it was built now or found. A library is specific to
the sources, torch, Python, the CUDA architectures (``TORCH_CUDA_ARCH_LIST``, default: the visible GPUs', or
9.0 without one) and the CPU's vector capability; build on a machine like the ones that will load it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .extension import Library, load_libraries


def build(cuda: bool = False, out: Path | None = None) -> list[Library]:
    """Build (or find) and load the CPU library, and the CUDA one with `cuda`, in `out` or the cache."""
    return load_libraries("cuda" if cuda else "cpu", out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m asr_plugin.losses.build", description=__doc__.split("\n")[0])
    parser.add_argument("--cuda", action="store_true", help="also build the CUDA library (needs nvcc, no GPU)")
    parser.add_argument(
        "--out", type=Path, help="directory to build into (default: the cache); point $ASR_PLUGIN_EXTENSION_DIR at it"
    )
    args = parser.parse_args(argv)
    for library in build(args.cuda, args.out.resolve() if args.out else None):
        print(f"{library.spec.kind}: {library.path} ({'built' if library.built else 'found'})")


if __name__ == "__main__":
    main()
