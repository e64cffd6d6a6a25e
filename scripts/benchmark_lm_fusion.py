"""WER and decoding time of greedy and beam search without and with an n-gram LM fused, side by side on the same
encoder outputs, at one or more weights (docs/decoding.md, "n-gram LM fusion"; `benchmarks.lm_fusion` says what is
measured).

    python scripts/benchmark_lm_fusion.py <run>/checkpoints --manifest data/manifests/mini_librispeech/test-espeak.jsonl --lm lm.arpa --lm-weight 0.3
    python scripts/benchmark_lm_fusion.py <run>/checkpoints --manifest data/manifests/mini_librispeech/dev.jsonl --lm lm.arpa --lm-weight 0.1 0.2 0.4 --methods beam --rounds 1
"""

from __future__ import annotations

import argparse

import torch

from asr_plugin.decoding.fusion import BLANK_LM_SCORE_MODES
from asr_plugin.user_errors import exit_on_user_error
from benchmarks.lm_fusion import benchmark_fusion, table


@exit_on_user_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a .ckpt, a directory of them, or a .nemo")
    parser.add_argument("--manifest", required=True, help="a manifest (JSON lines with transcripts)")
    parser.add_argument("--lm", required=True, help="an ARPA file (scripts/build_ngram_lm.py)")
    parser.add_argument("--lm-weight", type=float, nargs="+", default=[0.3], help="one or more weights (default 0.3)")
    parser.add_argument("--methods", nargs="+", choices=("greedy", "beam"), default=["greedy", "beam"])
    parser.add_argument(
        "--blank-lm-score-mode", choices=BLANK_LM_SCORE_MODES, default="lm_weighted_full", help="beam search's"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="utterances decoded together (default 16)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the fastest counts (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N utterances")
    args = parser.parse_args(argv)
    if min(args.batch_size, args.beam, args.rounds, args.threads) < 1:
        parser.error("--batch-size, --beam, --rounds and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    rows = benchmark_fusion(
        args.model,
        args.manifest,
        args.lm,
        args.lm_weight,
        args.batch_size,
        args.beam,
        args.rounds,
        args.limit,
        args.methods,
        args.blank_lm_score_mode,
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
