#!/usr/bin/env python
"""Trains the SentencePiece tokenizer (blank = id 0, see asr_plugin.data.tokenizer) on manifests' text.

    python scripts/train_tokenizer.py --manifests data/manifests/librispeech/train-clean-100.jsonl \
        --output data/manifests/librispeech/tokenizer_bpe500.model --vocab-size 500 --model-type bpe
"""

from __future__ import annotations

import argparse

from asr_plugin.data import read_manifest, train_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifests", nargs="+", required=True)
    parser.add_argument("--output", required=True, help="the .model file to write")
    parser.add_argument("--vocab-size", type=int, default=500, help="including the blank and <unk>")
    parser.add_argument("--model-type", choices=("bpe", "unigram"), default="bpe")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args()
    texts = [entry.text for path in args.manifests for entry in read_manifest(path)]
    tokenizer = train_tokenizer(texts, args.output, args.vocab_size, args.model_type, overwrite=args.overwrite)
    print(f"wrote {args.output}: vocab_size={tokenizer.vocab_size} (blank id {tokenizer.blank_id})")


if __name__ == "__main__":
    main()
