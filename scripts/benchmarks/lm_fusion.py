"""What n-gram LM shallow fusion costs and buys: WER and decoding time of greedy and beam search with and without
the LM, at one or more weights, on the same encoder outputs, side by side in one process.

Each batch (`batch_size` utterances sorted by length) is encoded once; each search decodes every batch without the
LM and with it at each weight in turn (`benchmarks.decoding.side_by_side`), `rounds` times, and the fastest round of
each counts (the machine's load moves all alike: their ratio is what the table reports). WER is against the manifest's
transcripts, normalised by the model's tokenizer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from asr_plugin.decoding import beam_search, greedy_search
from asr_plugin.decoding.fusion import Fusion, WeightedScorer
from asr_plugin.decoding.ngram_lm import check_lm_options, lm_fusion
from asr_plugin.evaluation.decoding_settings import decoding_settings, model_tokenizer
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend
from benchmarks.decoding import Batches, Decode, batched, manifest_utterances, side_by_side, word_error_rate


@dataclass(frozen=True)
class FusionRow:
    """One line of the table: a search without and with the LM."""

    method: str
    weight: float
    wer: float
    wer_fused: float
    seconds: float
    seconds_fused: float


@torch.no_grad()
def benchmark_fusion(
    model_path: str | os.PathLike,
    manifest: str | os.PathLike,
    lm_path: str | os.PathLike,
    weights: Sequence[float],
    batch_size: int = 16,
    beam: int = 4,
    rounds: int = 3,
    limit: int | None = None,
    methods: Sequence[str] = ("greedy", "beam"),
    blank_lm_score_mode: str = "lm_weighted_full",
) -> list[FusionRow]:
    """A row per method ("greedy", "beam") and weight (module docstring); beam search scores the blank by
    `blank_lm_score_mode`."""
    loaded = read_model(model_path)
    model, tokenizer = loaded.model.eval(), model_tokenizer(loaded)
    cap = decoding_settings(loaded, {})["max_symbols_per_frame"]
    frontend = build_frontend(loaded.require_frontend_spec()).eval()
    names = ("--lm", "--lm-weight")
    for weight in weights:
        check_lm_options(lm_path, weight, names)
    (lm,) = lm_fusion(lm_path, weights[0], tokenizer, names=names)
    audio, texts = manifest_utterances(manifest, frontend.sample_rate)
    audio, refs = audio[:limit], [tokenizer.normalize(text) for text in texts[:limit]]

    def encoded(indices: list[int]) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([audio[i].shape[0] for i in indices])
        signal = torch.nn.utils.rnn.pad_sequence([audio[i] for i in indices], batch_first=True)
        return (indices, *model.encode(*frontend(signal, lengths)))

    batches: Batches = [encoded(g) for g in batched([a.shape[0] for a in audio], batch_size)]
    searches: dict[str, Callable[[Fusion], Decode]] = {
        "greedy": lambda f: lambda e, n: [h.text for h in greedy_search(model, e, n, cap, tokenizer, fusion=f)],
        "beam": lambda f: (
            lambda e, n: [
                h.text
                for h in beam_search(
                    model, e, n, beam, tokenizer, cap, fusion=f, blank_lm_score_mode=blank_lm_score_mode
                )
            ]
        ),
    }
    unknown = [m for m in methods if m not in searches]
    if unknown:
        raise ValueError(f"methods {unknown}: expected some of {list(searches)}")
    fusions = [[WeightedScorer(lm.scorer, float(w))] for w in weights]
    rows = []
    for method in methods:
        search = searches[method]
        (plain, seconds), *fused = side_by_side(
            [(batches, search(())), *((batches, search(f)) for f in fusions)], len(audio), rounds
        )
        wer = word_error_rate(plain, refs, tokenizer)
        name = f"beam {beam}" if method == "beam" else method
        for w, (texts_fused, seconds_fused) in zip(weights, fused):
            rows.append(FusionRow(name, w, wer, word_error_rate(texts_fused, refs, tokenizer), seconds, seconds_fused))
    return rows


def table(rows: Sequence[FusionRow]) -> str:
    """The Markdown table of `rows`."""
    lines = [
        "| method | LM weight | WER % | WER % with the LM | decoding s | with the LM | time ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.method} | {r.weight:g} | {r.wer:.2f} | {r.wer_fused:.2f} | {r.seconds:.2f} | {r.seconds_fused:.2f} "
        f"| {r.seconds_fused / r.seconds:.3f} |"
        for r in rows
    ]
    return "\n".join(lines)
