#!/usr/bin/env python
"""Computes global mean/std of the 80-bin log-mel features over training manifests into a JSON file
(read by TransducerDataModule's `stats_path`).

    python scripts/compute_feature_stats.py --manifests data/manifests/librispeech/train-clean-100.jsonl \
        --output data/manifests/librispeech/feature_stats.json [--max-utterances 5000] [--num-workers 4]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from asr_plugin.data import LogMelFeatures, compute_feature_stats, read_manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifests", nargs="+", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--num-mel-bins", type=int, default=80)
    parser.add_argument("--max-utterances", type=int, default=None, help="random subset size (default: all)")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args()
    if Path(args.output).exists() and not args.overwrite:
        raise SystemExit(f"{args.output} exists; pass --overwrite to replace it")
    entries = [entry for path in args.manifests for entry in read_manifest(path)]
    stats = compute_feature_stats(entries, LogMelFeatures(num_mel_bins=args.num_mel_bins), args.max_utterances,
                                  args.num_workers, args.seed)
    stats.save(args.output)
    print(f"wrote {args.output} from {stats.num_frames} frames")


if __name__ == "__main__":
    main()
