#!/usr/bin/env python
"""Synthesis throughput of the mini corpus' engines (espeak-ng, Piper), one process each; with --stages, where a
Piper utterance's time goes (voice load, phonemisation, inference, resampling, room and noise, FLAC writing):

python scripts/benchmark_tts.py [--utterances 64] [--stages]
"""

from __future__ import annotations

import argparse

from asr_plugin.user_errors import exit_on_user_error
from benchmarks.tts import PIPER_STAGES, piper_stages, tts_throughput


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--utterances", type=int, default=64)
    parser.add_argument("--stages", action="store_true", help="time each stage of Piper's utterances instead")
    args = parser.parse_args(argv)
    if args.stages:
        seconds = piper_stages(args.utterances)
        total = sum(seconds[stage] for stage in PIPER_STAGES)
        print(f"Piper, {args.utterances} utterances, {seconds['audio (s)']:.1f} s of audio")
        print("| stage | wall (s) | share |\n| --- | --- | --- |")
        for stage in PIPER_STAGES:
            print(f"| {stage} | {seconds[stage]:.2f} | {100 * seconds[stage] / total:.1f} % |")
        return
    print("| engine | utterances | audio (s) | wall (s) | x real time |\n| --- | --- | --- | --- | --- |")
    for row in tts_throughput(args.utterances):
        print(
            f"| {row.engine} | {row.utterances} | {row.audio_s:.1f} | {row.wall_s:.2f} | {row.real_time_factor:.1f} |"
        )


if __name__ == "__main__":
    exit_on_user_error()(main)()
