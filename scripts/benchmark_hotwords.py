"""Phrase boosting's gains and cost on one model file (docs/decoding.md, "Phrase boosting"; `benchmarks.hotwords`
says what is measured): the recall of the dev set's most often missed words and the WER of every manifest without
and with boosting them, then greedy search's time with 10,000 random phrases over without, as a ratio.

    python scripts/benchmark_hotwords.py <checkpoint> --dev <dev.jsonl> --manifest <test.jsonl> --words 30

--sherpa-onnx DIR also exports the model there and compares its transcripts of the first manifest with
sherpa-onnx's (greedy, modified_beam_search, and that with the boosted words as its hotwords file;
`benchmarks.hotwords_sherpa`).
"""

from __future__ import annotations

import argparse
import sys

import torch

from asr_plugin.decoding import WeightedScorer
from asr_plugin.decoding.ngram_lm import NgramLM
from benchmarks.hotwords import Decoder, cost_ratios, gains, table
from benchmarks.hotwords_sherpa import sherpa_agreement


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a model file: .ckpt, a directory of them, or .nemo")
    parser.add_argument("--dev", required=True, help="the manifest whose most often missed words are boosted")
    parser.add_argument("--manifest", action="append", required=True, help="a manifest to score (repeatable)")
    parser.add_argument("--words", type=int, default=30, help="words boosted (default 30)")
    parser.add_argument("--hotwords-score", type=float, default=1.5, help="per-token score (default 1.5)")
    parser.add_argument("--phrases", type=int, default=10_000, help="random phrases of the cost (default 10000)")
    parser.add_argument("--batch-size", type=int, default=16, help="utterances decoded together (default 16)")
    parser.add_argument("--repeats", type=int, default=5, help="timings of the cost, alternated (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N utterances of each manifest")
    parser.add_argument("--search", choices=("greedy", "beam"), default="greedy", help="the gains' search")
    parser.add_argument("--beam", type=int, default=4, help="beam width (--search beam, --sherpa-onnx; default 4)")
    parser.add_argument("--lm", default=None, help="an ARPA n-gram LM: the cost also with it fused")
    parser.add_argument("--lm-weight", type=float, default=0.3, help="--lm: its weight (default 0.3)")
    parser.add_argument("--sherpa-onnx", default=None, metavar="DIR", help="export here and compare with sherpa-onnx")
    args = parser.parse_args(argv)
    if min(args.words, args.phrases, args.batch_size, args.repeats, args.threads, args.beam) < 1:
        parser.error("--words, --phrases, --batch-size, --repeats, --threads and --beam must be >= 1")
    torch.set_num_threads(args.threads)
    try:
        decoder = Decoder(args.model, args.batch_size)
        boosted, rows = gains(
            decoder, args.dev, args.manifest, args.words, args.hotwords_score, args.limit, args.search, args.beam
        )
        lm = None
        if args.lm is not None:
            pieces = [decoder.tokenizer.id_to_piece(k) for k in range(decoder.tokenizer.vocab_size)]
            lm = WeightedScorer(NgramLM.from_arpa(args.lm, pieces, decoder.tokenizer.blank_id), args.lm_weight)
        count, build, ratios = cost_ratios(
            decoder, args.manifest, args.phrases, args.hotwords_score, args.repeats, args.limit, lm
        )
        agreed = {}
        if args.sherpa_onnx is not None:
            agreed = sherpa_agreement(
                args.model, args.manifest[0], boosted, args.hotwords_score, args.beam, args.sherpa_onnx, args.limit
            )
    except (FileNotFoundError, ValueError) as err:
        parser.error(str(err))
    print(table(boosted, rows))
    for name, share in agreed.items():
        print(f"sherpa-onnx and ours agree ({name}, beam {args.beam}): {100 * share:.1f} % of the utterances")
    print(f"\n{count} random phrases: tokenised and built in {build:.2f} s")
    for setting, ratio in ratios.items():
        print(
            f"greedy search at batch {args.batch_size} with them at {setting}: {ratio:.2f} x its time without "
            f"(median of {args.repeats})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
