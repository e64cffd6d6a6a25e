#!/usr/bin/env python
"""Synthesis throughput of the mini corpus' engines (espeak-ng, Piper), one process each:

python scripts/benchmark_tts.py [--utterances 64]
"""

from __future__ import annotations

import argparse

from asr_plugin.user_errors import exit_on_user_error
from benchmarks.tts import tts_throughput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--utterances", type=int, default=64)
    args = parser.parse_args()
    print("| engine | utterances | audio (s) | wall (s) | x real time |\n| --- | --- | --- | --- | --- |")
    for row in tts_throughput(args.utterances):
        print(
            f"| {row.engine} | {row.utterances} | {row.audio_s:.1f} | {row.wall_s:.2f} | {row.real_time_factor:.1f} |"
        )


if __name__ == "__main__":
    exit_on_user_error()(main)()
