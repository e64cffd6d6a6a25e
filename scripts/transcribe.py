"""Transcribes audio files with a trained checkpoint: ``python scripts/transcribe.py a.flac b.wav --checkpoint X``.

The tokenizer and the features (front end, statistics) are the checkpoint's own, read from it; nothing else
is needed (a ``.nemo`` works wherever a checkpoint does). Any soundfile-readable audio works; it is averaged to
mono and resampled to the model's rate, read piece by piece (memory does not grow with the file's length). Audio
longer than --chunk-seconds is decoded in chunks cut at quiet moments, with its progress on stderr. A file that
cannot be transcribed (no audio, empty, NaN or infinite samples) is named on stderr, the others are transcribed,
and the exit status is 1.

As a stream (docs/streaming.md, "Transcribing and evaluating as a stream"): --streaming feeds the audio in pieces
of --chunk-ms to a cache-aware streaming model (one trained with a limited attention context) at one of its
lookaheads (--att-context-size L,R), with the online features of its own front end and greedy search, one segment
per file as eval.py streaming=true decodes (--endpointing: sherpa-onnx's endpoint rules close segments at pauses,
as for a microphone's endless stream); --buffered streams any model, full-context ones
included, through overlapping windows (--buffer-left-ms, --buffer-chunk-ms, --buffer-right-ms). Each file's final
line is ``path<TAB>text`` on stdout either way; --partials adds, on stderr, a line ``partial<TAB>path<TAB>text``
each time a file's text so far changes.
"""

from __future__ import annotations

import argparse
import sys

from asr_plugin.evaluation.streaming_session import BufferedWindows, StreamingMode, context_argument
from asr_plugin.evaluation.streaming_transcriber import PIECE_MS, StreamingTranscriber
from asr_plugin.evaluation.transcriber import Transcriber
from asr_plugin.formats import model_files
from asr_plugin.user_errors import exit_on_user_error

PARTIAL = "partial"  # the first field of a --partials line


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("audio", nargs="+", help="audio files")
    parser.add_argument("--checkpoint", required=True, help="a .ckpt file, a directory of them, or a .nemo")
    parser.add_argument("--avg", type=int, default=1, help="average the last N checkpoints")
    parser.add_argument("--method", choices=("greedy", "beam"), default=None, help="default beam (greedy streaming)")
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
        default=None,
        help="offline: decode longer audio in chunks of at most this many seconds (default 30)",
    )
    parser.add_argument("--device", default="cpu")
    stream = parser.add_argument_group("streaming")
    modes = stream.add_mutually_exclusive_group()
    modes.add_argument("--streaming", action="store_true", help="cache-aware streaming (a model trained to stream)")
    modes.add_argument("--buffered", action="store_true", help="buffered streaming (any model)")
    stream.add_argument(
        "--att-context-size",
        type=context_argument,
        default=None,
        metavar="L,R",
        help="--streaming: the model's attention context to stream with (default: its default context)",
    )
    stream.add_argument(
        "--chunk-ms", type=float, default=PIECE_MS, help=f"audio fed at a time, in ms (default {PIECE_MS:g})"
    )
    stream.add_argument("--partials", action="store_true", help="partial results on stderr as they change")
    stream.add_argument(
        "--endpointing",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="sherpa-onnx's endpoint rules close segments at pauses, as for a microphone's endless stream "
        "(default: off, one segment per file, as eval.py streaming=true)",
    )
    windows = BufferedWindows()
    stream.add_argument("--buffer-left-ms", type=float, default=windows.left_ms, help="--buffered: left context")
    stream.add_argument("--buffer-chunk-ms", type=float, default=windows.chunk_ms, help="--buffered: chunk")
    stream.add_argument("--buffer-right-ms", type=float, default=windows.right_ms, help="--buffered: right context")
    return parser


def streaming_mode(args: argparse.Namespace) -> StreamingMode | None:
    """The streaming mode the arguments ask for (None: offline); errors name the option that does not apply."""
    if not (args.streaming or args.buffered):
        if args.att_context_size is not None or args.partials or args.endpointing:
            raise ValueError("--att-context-size, --partials and --endpointing need --streaming or --buffered")
        return None
    if args.method == "beam" or args.chunk_seconds is not None:
        raise ValueError(
            "streaming decodes with greedy search, as it arrives: --method beam and --chunk-seconds are offline"
        )
    windows = BufferedWindows(args.buffer_left_ms, args.buffer_chunk_ms, args.buffer_right_ms)
    kind = "cache_aware" if args.streaming else "buffered"
    return StreamingMode(kind, args.att_context_size, windows, endpointing=args.endpointing)


def partial_printer(path: str):
    """The --partials callback of one file: a marked line on stderr (stdout keeps only the final lines)."""
    return lambda text: print(f"{PARTIAL}\t{path}\t{text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    try:
        mode = streaming_mode(args)
    except ValueError as err:
        arguments.error(str(err))
    checkpoints = model_files(args.checkpoint, args.avg)
    print(f"model: {', '.join(map(str, checkpoints))}", file=sys.stderr, flush=True)  # which file(s) of a directory
    if mode is None:
        transcriber = Transcriber(
            checkpoints,
            args.method or "beam",
            args.beam,
            args.max_symbols_per_frame,
            args.device,
            chunk_seconds=30.0 if args.chunk_seconds is None else args.chunk_seconds,
        )
    else:
        try:
            transcriber = StreamingTranscriber(
                checkpoints, mode, args.max_symbols_per_frame, args.device, args.chunk_ms
            )
        except ValueError as err:  # a model or front end that cannot stream so, a lookahead it was not trained with
            arguments.error(str(err))
    status = 0
    for path in args.audio:
        try:
            if mode is None:
                text = transcriber.transcribe_file(path)
            else:
                text = transcriber.transcribe_file(path, partial_printer(path) if args.partials else None)
        except ValueError as err:  # names the file: no audio, empty, NaN or infinite samples
            print(f"error: {err}", file=sys.stderr, flush=True)
            status = 1
            continue
        print(f"{path}\t{text}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(exit_on_user_error()(main)())
