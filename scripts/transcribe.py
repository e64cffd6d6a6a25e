"""Transcribes audio files with a trained checkpoint: ``python scripts/transcribe.py a.flac b.wav --checkpoint X``.

The tokenizer and the features (front end, statistics) are the checkpoint's own, read from it; nothing else
is needed. Any soundfile-readable audio works; it is averaged to mono and resampled to the model's rate, read
piece by piece (memory does not grow with the file's length). Audio longer than --chunk-seconds is decoded in
chunks cut at quiet moments, with its progress on stderr. A file that cannot be transcribed (no audio, empty,
NaN or infinite samples) is named on stderr, the others are transcribed, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys

from asr_plugin.evaluation.transcriber import Transcriber
from asr_plugin.formats import model_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("audio", nargs="+", help="audio files")
    parser.add_argument("--checkpoint", required=True, help="a .ckpt file or a directory of them")
    parser.add_argument("--avg", type=int, default=1, help="average the last N checkpoints")
    parser.add_argument("--method", choices=("greedy", "beam"), default="beam")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument(
        "--max-symbols-per-frame",
        type=int,
        default=None,
        help="tokens per frame at most (default: the checkpoint's, as its validation decoded)",
    )
    parser.add_argument(
        "--chunk-seconds",
        type=float,
        default=30.0,
        help="decode longer audio in chunks of at most this many seconds (default 30)",
    )
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    transcriber = Transcriber(
        model_files(args.checkpoint, args.avg),
        args.method,
        args.beam,
        args.max_symbols_per_frame,
        args.device,
        chunk_seconds=args.chunk_seconds,
    )
    status = 0
    for path in args.audio:
        try:
            text = transcriber.transcribe_file(path)
        except ValueError as err:  # names the file: no audio, empty, NaN or infinite samples
            print(f"error: {err}", file=sys.stderr, flush=True)
            status = 1
            continue
        print(f"{path}\t{text}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
