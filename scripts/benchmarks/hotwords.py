"""What phrase boosting buys and costs, on one model file and its manifests (docs/decoding.md, "Phrase boosting").

Gains: the words the model most often misses on the dev manifest (a reference word counts as missed where the
utterance's hypothesis has fewer of it than its reference) are boosted, each as a one-word phrase; for every
manifest, their recall (the share of their reference occurrences that the hypotheses have, counted per
utterance) and the WER without and with boosting, greedy or beam search. Cost: greedy search at one batch size over the
manifests' encoder output with and without a list of random phrases (1 to 3 words drawn from the manifests'
references), decoding time only, the two timed alternately in one process; the ratio is the median of the
repeats. It is measured twice: at the boosting score, where the boosted search also emits other tokens (more or
fewer label steps), and at a score of 0.001, where it emits what the plain search does, so that the ratio is the
scorer's own work; with an n-gram LM, also at 0.001 fused with the LM (both scorers' work together).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from asr_plugin.data import read_manifest
from asr_plugin.decoding import WeightedScorer, decode
from asr_plugin.decoding.phrase_boosting import PhraseBoosting, PhraseGraph
from asr_plugin.evaluation.decoding_settings import decoding_settings, model_tokenizer
from asr_plugin.evaluation.scoring import Recognition, score
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend
from benchmarks.decoding import Batches, batched, side_by_side


@dataclass(frozen=True)
class SetRow:
    """One manifest's recall of the boosted words and WER, without and with boosting."""

    name: str
    occurrences: int
    recall_before: float
    recall_after: float
    wer_before: float
    wer_after: float


def missed_words(refs: Sequence[str], hyps: Sequence[str]) -> Counter:
    """Per reference word, how many of its occurrences the hypotheses miss (per utterance, by count)."""
    missed: Counter = Counter()
    for ref, hyp in zip(refs, hyps, strict=True):
        missed.update(Counter(ref.split()) - Counter(hyp.split()))
    return missed


def recall(words: set[str], refs: Sequence[str], hyps: Sequence[str]) -> tuple[int, float]:
    """(occurrences of `words` in the references, the share of them the hypotheses have, per utterance)."""
    total = found = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        wanted, got = Counter(w for w in ref.split() if w in words), Counter(hyp.split())
        total += sum(wanted.values())
        found += sum(min(n, got[w]) for w, n in wanted.items())
    return total, found / total if total else 0.0


class Decoder:
    """A model file's greedy search over manifests, encoded once per manifest at `batch_size`."""

    def __init__(self, path: str | os.PathLike, batch_size: int) -> None:
        loaded = read_model(path)
        self.model, self.tokenizer = loaded.model.eval(), model_tokenizer(loaded)
        self.cap = decoding_settings(loaded, {})["max_symbols_per_frame"]
        self.frontend = build_frontend(loaded.require_frontend_spec()).eval()
        self.batch_size = batch_size

    @torch.no_grad()
    def encode(self, manifest: str | os.PathLike, limit: int | None = None) -> tuple[Batches, list[str]]:
        """The manifest's encoder output in batches and its normalised references."""
        entries = read_manifest(manifest)[:limit]
        audio = [entry.load_audio(self.frontend.sample_rate) for entry in entries]
        batches = []
        for group in batched([a.shape[0] for a in audio], self.batch_size):
            lengths = torch.tensor([audio[i].shape[0] for i in group])
            padded = torch.nn.utils.rnn.pad_sequence([audio[i] for i in group], batch_first=True)
            batches.append((group, *self.model.encode(*self.frontend(padded, lengths))))
        return batches, [self.tokenizer.normalize(entry.text) for entry in entries]

    def texts(
        self, batches: Batches, count: int, fusion: Sequence[WeightedScorer] = (), method: str = "greedy", beam: int = 4
    ) -> tuple[list[str], float]:
        """(texts in manifest order by `method`, "greedy" or "beam" of width `beam`, decoding seconds)."""

        def run(encoded, lengths):
            hyps = decode(self.model, encoded, lengths, method, self.tokenizer, beam, self.cap, fusion=fusion)
            return [h.text or "" for h in hyps]

        return side_by_side([(batches, run)], count, repeats=1)[0]


def wer(refs: Sequence[str], hyps: Sequence[str]) -> float:
    return score([Recognition(str(i), r, h) for i, (r, h) in enumerate(zip(refs, hyps))]).wer


def gains(
    decoder: Decoder,
    dev: str,
    manifests: Sequence[str],
    words: int,
    hotwords_score: float,
    limit=None,
    method: str = "greedy",
    beam: int = 4,
):
    """(the boosted words, one `SetRow` per manifest), decoding by `method` ("greedy", or "beam" of width
    `beam`); the boosted words are those greedy search misses most often on `dev`."""
    batches, refs = decoder.encode(dev, limit)
    hyps, _ = decoder.texts(batches, len(refs))
    boosted = [word for word, _ in missed_words(refs, hyps).most_common(words)]
    fusion = [WeightedScorer(PhraseBoosting.from_phrases(boosted, decoder.tokenizer, hotwords_score), 1.0)]
    rows = []
    for manifest in manifests:
        batches, refs = decoder.encode(manifest, limit)
        before, _ = decoder.texts(batches, len(refs), (), method, beam)
        after, _ = decoder.texts(batches, len(refs), fusion, method, beam)
        count, recall_before = recall(set(boosted), refs, before)
        _, recall_after = recall(set(boosted), refs, after)
        name = Path(manifest).stem
        rows.append(SetRow(name, count, recall_before, recall_after, wer(refs, before), wer(refs, after)))
    return boosted, rows


def random_phrases(words: Sequence[str], count: int, seed: int = 0) -> list[str]:
    """`count` distinct phrases of 1 to 3 words drawn from `words` (fewer when the words cannot make so many)."""
    rng = random.Random(seed)
    phrases: dict[str, None] = {}
    for _ in range(20 * count):
        phrases[" ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))] = None
        if len(phrases) == count:
            break
    return list(phrases)


def random_boosting(tokenizer, references: Sequence[str], count: int) -> tuple[int, float, PhraseGraph]:
    """(phrases, seconds to tokenise and build them, the graph) of `count` random phrases of the references' words
    (`random_phrases`), each of weight 1."""
    texts = random_phrases(sorted({word for ref in references for word in ref.split()}), count)
    start = time.perf_counter()
    graph = PhraseGraph.build([(tuple(tokenizer.encode(text)), 1.0) for text in texts], tokenizer.vocab_size)
    return len(texts), time.perf_counter() - start, graph


def cost_ratios(
    decoder: Decoder,
    manifests: Sequence[str],
    phrases: int,
    hotwords_score: float,
    repeats: int,
    limit=None,
    lm: WeightedScorer | None = None,
) -> tuple[int, float, dict[str, float]]:
    """(phrases, graph build seconds, {setting: median ratio of greedy decoding time with the phrases to without})
    at `hotwords_score`, at 0.001 and, with `lm` (an n-gram LM and its weight), at 0.001 fused with the LM."""
    encoded = [decoder.encode(m, limit) for m in manifests]
    count, build_seconds, graph = random_boosting(
        decoder.tokenizer, [ref for _, refs in encoded for ref in refs], phrases
    )
    boosting = PhraseBoosting(graph, decoder.tokenizer.blank_id)
    settings = {f"score {weight:g}": [WeightedScorer(boosting, weight)] for weight in (hotwords_score, 0.001)}
    if lm is not None:
        settings[f"score 0.001 and the LM at weight {lm.weight:g}"] = [WeightedScorer(boosting, 0.001), lm]
    ratios = {}
    for name, fusion in settings.items():
        measured = []
        for _ in range(repeats):
            plain = sum(decoder.texts(batches, len(refs))[1] for batches, refs in encoded)
            boosted = sum(decoder.texts(batches, len(refs), fusion)[1] for batches, refs in encoded)
            measured.append(boosted / plain)
        ratios[name] = statistics.median(measured)
    return count, build_seconds, ratios


def table(boosted: Sequence[str], rows: Sequence[SetRow]) -> str:
    """The Markdown table of the gains."""
    lines = [
        f"boosted words ({len(boosted)}): {' '.join(boosted)}",
        "",
        "| set | occurrences | recall before % | recall after % | WER before % | WER after % |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.name} | {r.occurrences} | {100 * r.recall_before:.1f} | {100 * r.recall_after:.1f} | "
        f"{r.wer_before:.2f} | {r.wer_after:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)
