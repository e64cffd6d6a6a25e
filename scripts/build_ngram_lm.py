"""Builds a token-level ARPA n-gram LM for shallow fusion: ``python scripts/build_ngram_lm.py --output lm.arpa``.

The text (a manifest's transcripts, by default the demo's training split, or a text file with one sentence a
line) is tokenised with the model's tokenizer (--checkpoint's, or a SentencePiece --tokenizer file, by default the
demo's) and IRSTLM (Debian's package irstlm) estimates the LM over its pieces (--words nemo: NeMo's chr(k + 100)
words instead, the ARPA NeMo's NGPU-LM reads); decode with it through eval.py decoding.lm.path=... or
transcribe.py --lm (docs/decoding.md, "n-gram LM fusion").
"""

from __future__ import annotations

import argparse
import sys

from asr_plugin.data.sources.manifest import read_manifest
from asr_plugin.decoding.ngram_build import SMOOTHINGS, WORDS, build_arpa, token_sentences
from asr_plugin.evaluation.decoding_settings import model_tokenizer
from asr_plugin.formats import read_model
from asr_plugin.text.tokenizer import Tokenizer
from asr_plugin.user_errors import exit_on_user_error

DEMO_MANIFEST = "data/manifests/mini_librispeech/train.jsonl"
DEMO_TOKENIZER = "data/manifests/mini_librispeech/tokenizer_bpe128.model"


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, help="the ARPA file to write")
    text = parser.add_mutually_exclusive_group()
    text.add_argument("--manifest", default=DEMO_MANIFEST, help="a manifest whose transcripts are the text")
    text.add_argument("--text", help="a text file, one sentence a line")
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--tokenizer", default=DEMO_TOKENIZER, help="a SentencePiece model trained by this project")
    model.add_argument("--checkpoint", help="a .ckpt or .nemo whose tokenizer to use")
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--smoothing", choices=SMOOTHINGS, default="witten-bell", help="IRSTLM's estimator")
    parser.add_argument("--words", choices=WORDS, default="pieces", help="the ARPA's words: pieces or NeMo's")
    return parser


@exit_on_user_error()
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.text is not None:
        with open(args.text, encoding="utf-8") as handle:
            texts = handle.read().splitlines()
    else:
        texts = [entry.text for entry in read_manifest(args.manifest)]
    tokenizer = Tokenizer(args.tokenizer) if args.checkpoint is None else model_tokenizer(read_model(args.checkpoint))
    sentences = token_sentences(texts, tokenizer, args.words)
    path = build_arpa(sentences, args.output, args.order, args.smoothing)
    print(
        f"{path}: {args.order}-gram LM of {len(sentences)} sentences ({args.smoothing}, {args.words})", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
