#!/usr/bin/env python
"""Generates the synthetic mini LibriSpeech corpus (espeak-ng speech, LibriSpeech layout, 16 kHz flac).

    python scripts/make_mini_librispeech.py --root data/mini_librispeech [--n-train 3000 --n-dev 200 --n-test 300]
"""

from __future__ import annotations

import argparse
import time

import soundfile as sf

from asr_plugin.data import MINI_SPLITS, make_mini_librispeech
from asr_plugin.data.mini_corpus import plan_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="data/mini_librispeech")
    parser.add_argument("--n-train", type=int, default=3000)
    parser.add_argument("--n-dev", type=int, default=200)
    parser.add_argument("--n-test", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    root = make_mini_librispeech(args.root, args.n_train, args.n_dev, args.n_test, args.seed)
    elapsed = time.perf_counter() - start
    plan = plan_corpus(args.n_train, args.n_dev, args.n_test, args.seed)
    for split in MINI_SPLITS:
        seconds = [sf.info(str(p)).duration for p in sorted((root / split).rglob("*.flac"))]
        voices = sorted({utt.speaker.voice for utt in plan[split]})
        words = {word for utt in plan[split] for word in utt.text.split()}
        print(f"{split}: {len(seconds)} utterances, {sum(seconds) / 3600:.3f} h, "
              f"{min(seconds):.2f}-{max(seconds):.2f} s each, {len(words)} distinct words, "
              f"{len(voices)} speakers: {' '.join(voices)}")
    print(f"corpus at {root} ready in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
