"""Compares NeMo's own model with our import of it on one batch and prints the differences (needs NeMo).

For each architecture of scripts/make_nemo_fixtures.py (or the given .nemo files): front-end features,
encoder output, joint log-probabilities (max abs difference over valid frames), NeMo's loss against ours in
both modes, and greedy transcripts (`benchmarks.nemo_compare`). tests/finetune/test_nemo_equivalence.py
asserts on the same numbers.

    python scripts/compare_nemo_import.py --out /tmp/nemo_fixtures
    python scripts/compare_nemo_import.py --out /tmp/nemo_full --full-size   # ~120 M-parameter models
    python scripts/compare_nemo_import.py --nemo stt_en_conformer_transducer_small.nemo
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from asr_plugin.user_errors import exit_on_user_error
from benchmarks.nemo_compare import compare_file
from benchmarks.nemo_examples import ARCHITECTURES, save_example_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo", nargs="*", help=".nemo files (default: make the fixtures under --out)")
    parser.add_argument("--out", help="directory for the fixtures (default: a temporary one)")
    parser.add_argument("--full-size", action="store_true", help="fixtures at the example configs' own sizes")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp()
    paths = args.nemo or [save_example_model(name, out, full_size=args.full_size) for name in ARCHITECTURES]
    for path in paths:
        result = compare_file(path)
        print(
            f"{Path(path).name}: "
            + ", ".join(
                f"{key} {value:.2e}" if isinstance(value, float) and not key.startswith("loss") else f"{key} {value}"
                for key, value in result.items()
            )
        )


if __name__ == "__main__":
    exit_on_user_error()(main)()
