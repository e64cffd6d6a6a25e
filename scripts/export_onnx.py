"""Exports a checkpoint or a .nemo file for sherpa-onnx: ``python scripts/export_onnx.py CHECKPOINT_OR_NEMO OUTDIR [--int8]``.

Writes encoder.onnx, decoder.onnx, joiner.onnx and tokens.txt (with --int8 also *.int8.onnx) in the layout
of sherpa-onnx's NeMo transducer, and export_record.json (each file's sha256, the model's, the source): OUTDIR is
written aside and swapped in whole, so it never mixes two models (--overwrite replaces an earlier export there,
nothing of it left behind; a directory holding other files is refused). Decode them with

    sherpa_onnx.OfflineRecognizer.from_transducer(encoder, decoder, joiner, tokens,
                                                  model_type="nemo_transducer", feature_dim=F)

(F: the number of mel bins, printed below). A model trained with the front end of kind "sherpa"
(``data.frontend={kind: sherpa}``) is trained on sherpa-onnx's own features: its encoder starts with the front
end's own normalisation and sherpa-onnx gives the recipe's transcripts. For any other
front end the encoder turns sherpa-onnx's features into the training ones approximately (a feature adapter:
transcripts close, not equal; docs/decoding.md, "ONNX for sherpa-onnx").

With --streaming, a cache-aware streaming model trained on the front end of kind "sherpa_online"
(``experiment=mini_streaming``) is exported for sherpa-onnx's online recogniser, one lookahead per directory
(--att-context-size L,R, else the model's default; --every-lookahead writes OUTDIR/<L>_<R>/ for each), decoded by

    sherpa_onnx.OnlineRecognizer.from_transducer(tokens, encoder, decoder, joiner, model_type="nemo_transducer")

(docs/streaming.md, "Deploying to sherpa-onnx online"). Needs ``pip install -e '.[onnx]'``. The input is only read.
"""

from __future__ import annotations

import argparse
import os
import sys

from asr_plugin.evaluation.streaming_session import context_argument
from asr_plugin.export import export_onnx, export_onnx_every_lookahead, export_onnx_streaming
from asr_plugin.export.onnx_streaming import lookahead_dir_name
from asr_plugin.formats import read_model
from asr_plugin.user_errors import exit_on_user_error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a .ckpt file, a directory of them, a NeMo .nemo file (any model file)")
    parser.add_argument("out_dir", help="output directory")
    parser.add_argument("--int8", action="store_true", help="also write onnxruntime's dynamic int8 quantisation")
    parser.add_argument("--avg", type=int, default=1, help="export the average of the last N checkpoints")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing export in OUTDIR")
    parser.add_argument("--streaming", action="store_true", help="for sherpa-onnx's online recogniser")
    lookahead = parser.add_mutually_exclusive_group()
    lookahead.add_argument(
        "--att-context-size", type=context_argument, metavar="L,R", help="with --streaming: the context to export"
    )
    lookahead.add_argument(
        "--every-lookahead", action="store_true", help="with --streaming: each streaming context into OUTDIR/<L>_<R>/"
    )
    args = parser.parse_args(argv)
    if not args.streaming and (args.att_context_size or args.every_lookahead):
        parser.error("--att-context-size and --every-lookahead need --streaming")
    loaded = read_model(args.source, args.avg)
    spec, tokenizer = loaded.require_frontend_spec(), loaded.require_tokenizer()
    options = dict(int8=args.int8, overwrite=args.overwrite, source=os.path.abspath(args.source))
    if args.every_lookahead:
        exports = export_onnx_every_lookahead(loaded.model, spec, tokenizer, args.out_dir, **options)
        paths = {
            f"{lookahead_dir_name(c)}/{name}": path for c, files in exports.items() for name, path in files.items()
        }
    elif args.streaming:
        paths = export_onnx_streaming(loaded.model, spec, tokenizer, args.out_dir, args.att_context_size, **options)
    else:
        paths = export_onnx(loaded.model, spec, tokenizer, args.out_dir, **options)
    for name, path in paths.items():
        print(f"{name}: {path}")
    print(f"feature_dim: {spec['options']['num_mel_bins']}")
    if args.streaming:
        print("features: sherpa-onnx online's own (exact)")
    else:
        exact = spec["kind"] == "sherpa"
        print("features: " + ("sherpa-onnx's own (exact)" if exact else "adapted from sherpa-onnx's (approximate)"))
    return 0


if __name__ == "__main__":
    sys.exit(exit_on_user_error()(main)())
