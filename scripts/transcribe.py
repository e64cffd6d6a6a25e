"""Transcribes audio files with a trained checkpoint: ``python scripts/transcribe.py a.flac b.wav --checkpoint X``.

Features match training: the tokenizer and feature stats come from the training run's
``.hydra/config.yaml`` (found above the checkpoint) unless --tokenizer/--stats are given. Any
soundfile-readable audio works; it is averaged to mono and resampled to 16 kHz.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parents[1]))  # as the recipes set it

from asr_plugin.evaluation.checkpoints import select_checkpoints  # noqa: E402
from asr_plugin.evaluation.transcriber import Transcriber, data_files_from_run_config, find_run_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("audio", nargs="+", help="audio files")
    parser.add_argument("--checkpoint", required=True, help="a .ckpt file or a directory of them")
    parser.add_argument("--avg", type=int, default=1, help="average the last N checkpoints")
    parser.add_argument("--tokenizer", help="SentencePiece .model (default: from the run config)")
    parser.add_argument("--stats", help="feature stats JSON (default: from the run config)")
    parser.add_argument("--run-config", help="the training run's .hydra/config.yaml (default: searched above the checkpoint)")
    parser.add_argument("--method", choices=("greedy", "beam"), default="beam")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-symbols-per-frame", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    tokenizer, stats, mel_bins = args.tokenizer, args.stats, 80
    if tokenizer is None or stats is None:
        config = args.run_config or find_run_config(args.checkpoint)
        if config is None:
            parser.error("no .hydra/config.yaml above the checkpoint: pass --tokenizer and --stats (or --run-config)")
        run_tokenizer, run_stats, mel_bins = data_files_from_run_config(config)
        tokenizer, stats = tokenizer or run_tokenizer, stats or run_stats
    transcriber = Transcriber(select_checkpoints(args.checkpoint, args.avg), tokenizer, stats, mel_bins,
                              args.method, args.beam, args.max_symbols_per_frame, args.device)
    for path, text in zip(args.audio, transcriber.transcribe(args.audio)):
        print(f"{path}\t{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
