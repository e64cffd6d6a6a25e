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
line is ``path<TAB>text`` on stdout either way (a path or text holding a tab or a newline as a JSON string);
--partials adds, on stderr, a line ``partial<TAB>path<TAB>text`` each time a file's text so far changes.

--hotwords FILE boosts the phrases of a sherpa-onnx hotwords file (one phrase per line, optionally `` :score``)
in the search, offline and streaming, each token of a phrase by its score or --hotwords-score (docs/decoding.md,
"Phrase boosting"). --lm FILE fuses an ARPA n-gram LM (scripts/build_ngram_lm.py) at --lm-weight
(docs/decoding.md, "n-gram LM fusion").

--timestamps DIR also writes each file's subtitles, DIR/<file stem>.srt and .vtt (one cue per segment: a
sentence ending in .?!, or words up to a pause longer than --segment-pause seconds), and DIR/timestamps.jsonl,
one JSON line per file with its token, word and segment start and end in seconds (docs/decoding.md, "Timestamps").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from asr_plugin.decoding.ngram_lm import DEFAULT_LM_WEIGHT
from asr_plugin.evaluation.chunk_length import default_chunk_seconds
from asr_plugin.evaluation.fusion_spec import DEFAULT_HOTWORDS_SCORE, FusionSpec
from asr_plugin.evaluation.streaming_session import BufferedWindows, StreamingMode, context_argument
from asr_plugin.evaluation.streaming_transcriber import PIECE_MS, StreamingTranscriber
from asr_plugin.evaluation.subtitles import timing_record, write_subtitles
from asr_plugin.evaluation.transcriber import Transcriber
from asr_plugin.files import write_text_atomic
from asr_plugin.formats import model_files
from asr_plugin.line_fields import line_field
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
        "--score-norm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="beam: choose the result by log-probability / (tokens + 1), as NeMo's malsd_batch (default: on)",
    )
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
        help="offline: decode longer audio in chunks of at most this many seconds (default: the model's longest "
        "training utterance, at most 30, printed)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--hotwords", default=None, metavar="FILE", help="boost the phrases of this hotwords file")
    parser.add_argument(
        "--hotwords-score",
        type=float,
        default=None,
        help=f"--hotwords: per-token score of a phrase without its own (default {DEFAULT_HOTWORDS_SCORE:g})",
    )
    parser.add_argument("--lm", default=None, metavar="FILE", help="fuse this ARPA n-gram LM into the search")
    parser.add_argument(
        "--lm-weight", type=float, default=None, help=f"--lm: its scores' weight (default {DEFAULT_LM_WEIGHT:g})"
    )
    parser.add_argument("--timestamps", default=None, metavar="DIR", help="write .srt, .vtt and timestamps.jsonl here")
    parser.add_argument(
        "--segment-pause", type=float, default=None, help="--timestamps: a longer pause (seconds) ends a segment too"
    )
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


def fusion_spec(args: argparse.Namespace) -> FusionSpec:
    """The phrase boosting and LM fusion the arguments ask for; ValueError for --hotwords-score without
    --hotwords, --lm-weight without --lm, a score that is not finite and > 0 or a weight that is not finite."""
    if args.hotwords is None and args.hotwords_score is not None:
        raise ValueError("--hotwords-score needs --hotwords")
    if args.lm is None and args.lm_weight is not None:
        raise ValueError("--lm-weight needs --lm")
    score = DEFAULT_HOTWORDS_SCORE if args.hotwords_score is None else args.hotwords_score
    weight = DEFAULT_LM_WEIGHT if args.lm_weight is None else args.lm_weight
    return FusionSpec(args.hotwords, score, args.lm, weight, ("--lm", "--lm-weight"))


def check_timestamp_options(args: argparse.Namespace) -> None:
    """ValueError unless --segment-pause comes with --timestamps and the files' subtitles get distinct names."""
    if args.timestamps is None:
        if args.segment_pause is not None:
            raise ValueError("--segment-pause needs --timestamps")
        return
    if args.segment_pause is not None and args.segment_pause < 0:
        raise ValueError(f"--segment-pause {args.segment_pause} must be >= 0 seconds")
    stems: dict[str, str] = {}
    for path in args.audio:
        stem = Path(path).stem
        if stem in stems and stems[stem] != path:
            raise ValueError(f"--timestamps: {stems[stem]} and {path} would write the same {stem}.srt")
        stems[stem] = path


def partial_printer(path: str):
    """The --partials callback of one file: a marked line on stderr (stdout keeps only the final lines)."""
    return lambda text: print(f"{PARTIAL}\t{line_field(path)}\t{line_field(text)}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    try:
        mode = streaming_mode(args)
        check_timestamp_options(args)
        fusion = fusion_spec(args)
    except ValueError as err:
        arguments.error(str(err))
    checkpoints = model_files(args.checkpoint, args.avg)
    print(f"model: {', '.join(map(str, checkpoints))}", file=sys.stderr, flush=True)  # which file(s) of a directory
    if mode is None:
        chunk_seconds = args.chunk_seconds
        if chunk_seconds is None:
            chunk_seconds, why = default_chunk_seconds(checkpoints[-1])
            print(
                f"chunks of at most {chunk_seconds:g} s ({why}; --chunk-seconds sets it)", file=sys.stderr, flush=True
            )
        transcriber = Transcriber(
            checkpoints,
            args.method or "beam",
            args.beam,
            args.max_symbols_per_frame,
            args.device,
            chunk_seconds=chunk_seconds,
            segment_pause=args.segment_pause,
            fusion=fusion,
            score_norm=args.score_norm,
        )
    else:
        try:
            transcriber = StreamingTranscriber(
                checkpoints, mode, args.max_symbols_per_frame, args.device, args.chunk_ms, args.segment_pause, fusion
            )
        except ValueError as err:  # a model or front end that cannot stream so, a lookahead it was not trained with
            arguments.error(str(err))
    status, records = 0, []
    for path in args.audio:
        partials = partial_printer(path) if args.partials else None
        try:
            if args.timestamps is not None:
                if mode is None:
                    text, timing = transcriber.transcribe_timed(path)
                else:
                    text, timing = transcriber.transcribe_timed(path, partials)
                write_subtitles(args.timestamps, path, timing)
                records.append(timing_record(path, text, timing))
            elif mode is None:
                text = transcriber.transcribe_file(path)
            else:
                text = transcriber.transcribe_file(path, partials)
        except ValueError as err:  # names the file: no audio, empty, NaN or infinite samples
            print(f"error: {err}", file=sys.stderr, flush=True)
            status = 1
            continue
        print(f"{line_field(path)}\t{line_field(text)}", flush=True)
    if args.timestamps is not None:
        write_text_atomic(Path(args.timestamps) / "timestamps.jsonl", "".join(f"{line}\n" for line in records))
    return status


if __name__ == "__main__":
    sys.exit(exit_on_user_error()(main)())
