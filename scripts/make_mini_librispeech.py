#!/usr/bin/env python
"""Generates the synthetic mini LibriSpeech corpus (espeak-ng and Piper speech, LibriSpeech layout, 16 kHz flac)
and prints each split's size, engines and speakers, and the synthesis time.

    python scripts/make_mini_librispeech.py --root data/mini_librispeech [--n-train 2700 --n-dev 210 --n-test 150]
    python scripts/make_mini_librispeech.py --root /tmp/no_piper --train-engines espeak   # Piper only in test-piper
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import soundfile as sf

from asr_plugin.data import MINI_SPLITS, make_mini_librispeech
from asr_plugin.data.demo.corpus import plan_corpus
from asr_plugin.data.demo.voices import ENGINES
from asr_plugin.user_errors import exit_on_user_error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="data/mini_librispeech")
    parser.add_argument("--n-train", type=int, default=2700)
    parser.add_argument("--n-dev", type=int, default=210)
    parser.add_argument("--n-test", type=int, default=150, help="utterances in each engine's test split")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--workers", type=int, default=None, help="synthesis processes (default: every CPU)")
    args = parser.parse_args()
    start = time.perf_counter()
    root = make_mini_librispeech(
        args.root, args.n_train, args.n_dev, args.n_test, args.seed, args.train_engines, args.workers
    )
    elapsed = time.perf_counter() - start
    plan = plan_corpus(args.n_train, args.n_dev, args.n_test, args.seed, args.train_engines)
    for split in MINI_SPLITS:
        seconds = {path.stem: sf.info(str(path)).duration for path in (root / split).rglob("*.flac")}
        hours = Counter()
        for utt in plan[split]:
            hours[utt.speaker.engine] += seconds[utt.id] / 3600
        per_engine = ", ".join(
            f"{engine} {sum(u.speaker.engine == engine for u in plan[split])} utt / {h:.3f} h / "
            f"{len({u.speaker.id for u in plan[split] if u.speaker.engine == engine})} speakers"
            for engine, h in sorted(hours.items())
        )
        words = {word for utt in plan[split] for word in utt.text.split()}
        print(
            f"{split}: {len(seconds)} utterances, {sum(seconds.values()) / 3600:.3f} h, "
            f"{min(seconds.values()):.2f}-{max(seconds.values()):.2f} s each, {len(words)} distinct words; "
            f"{per_engine}"
        )
    print(f"corpus at {root} ready in {elapsed:.1f} s")


if __name__ == "__main__":
    exit_on_user_error()(main)()
