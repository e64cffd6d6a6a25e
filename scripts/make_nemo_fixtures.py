"""Writes small `.nemo` checkpoints (random weights) built by NeMo itself from its example configs, for the
importer's tests and demos (needs NeMo; `benchmarks.nemo_examples` describes the configs).

    python scripts/make_nemo_fixtures.py --out /tmp/nemo_fixtures
    # -> conformer_transducer.nemo, fast_conformer_transducer.nemo, fast_conformer_tdt.nemo (0.75, 0.65 and
    #    1.01 MB with NeMo 3.0.0, 2026-12-01)
    python scripts/make_nemo_fixtures.py --out /tmp/nemo_full --full-size
    # the example configs' own (Large, ~120 M parameters) sizes, with a 2-layer LSTM: ~0.5 GB each
"""

from __future__ import annotations

import argparse

from asr_plugin.user_errors import exit_on_user_error
from benchmarks.nemo_examples import ARCHITECTURES, save_example_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for the .nemo files")
    parser.add_argument("--only", choices=sorted(ARCHITECTURES), help="write only this architecture")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full-size", action="store_true", help="the example configs' own sizes (~0.5 GB each)")
    args = parser.parse_args()
    for name in [args.only] if args.only else ARCHITECTURES:
        path = save_example_model(name, args.out, args.seed, args.full_size)
        print(f"{path}  {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    exit_on_user_error()(main)()
