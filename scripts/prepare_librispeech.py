#!/usr/bin/env python
"""Builds LibriSpeech manifests (JSON lines: id, path, duration, text), optionally downloading the
OpenSLR archives first (md5-checked; skipped with a message without network).

    python scripts/prepare_librispeech.py --root data/LibriSpeech --manifest-dir data/manifests/librispeech \
        --splits train-clean-100 dev-clean test-clean [--download] [--num-workers 8] [--strict] [--overwrite]

Unusable files are printed and listed in <manifest-dir>/<split>.skipped.tsv (or raise with --strict).
Existing manifests are kept unless --overwrite. The source tree is never modified.
"""

from __future__ import annotations

import argparse
import os

from asr_plugin.data import LIBRISPEECH_SPLITS, download_librispeech, prepare_librispeech


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="corpus directory holding one folder per split")
    parser.add_argument("--manifest-dir", required=True, help="output directory for <split>.jsonl")
    parser.add_argument("--splits", nargs="+", default=list(LIBRISPEECH_SPLITS))
    parser.add_argument("--download", action="store_true", help="fetch missing splits from OpenSLR first")
    parser.add_argument("--archive-dir", default=None, help="where archives go (default ROOT/archives)")
    parser.add_argument("--num-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--strict", action="store_true", help="raise on any unusable file instead of skipping")
    parser.add_argument("--overwrite", action="store_true", help="rebuild manifests that already exist")
    parser.add_argument("--full-check", action="store_true", help="decode all audio, not only headers")
    args = parser.parse_args()
    if args.download:
        download_librispeech(args.root, args.splits, args.archive_dir)
    prepare_librispeech(args.root, args.manifest_dir, args.splits, num_workers=args.num_workers,
                        strict=args.strict, overwrite=args.overwrite, full_check=args.full_check)


if __name__ == "__main__":
    main()
