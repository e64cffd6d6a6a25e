"""ARPA files for the n-gram LM tests. Random ones: every n-gram (up to the order) of random sentences, so each n-gram's
prefix and suffix are in the file too (as in any ARPA file an estimator writes), with random log10 probabilities and
back-off weights (unnormalised: kenlm and our reader only look the numbers up); and counted ones, the
maximum-likelihood LM of given sentences."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from asr_plugin.decoding.arpa_reader import ArpaNgrams
from asr_plugin.decoding.ngram_build import arpa_text


def write_random_arpa(path: Path, words: Sequence[str], order: int, seed: int, sentences: int = 80) -> Path:
    """Writes an ARPA of `order` over `words` (and <s>, </s>, <unk>) to `path`."""
    rng = random.Random(seed)
    grams: list[set[tuple[str, ...]]] = [set() for _ in range(order)]
    for _ in range(sentences):
        sentence = ["<s>", *(rng.choice(words) for _ in range(rng.randint(1, 8))), "</s>"]
        for k in range(1, order + 1):
            grams[k - 1].update(tuple(sentence[i : i + k]) for i in range(len(sentence) - k + 1))
    grams[0].add(("<unk>",))
    # in the order of `words`, not the spelling's: two spellings of one vocabulary get the same numbers
    rank = {word: i for i, word in enumerate(["<s>", "</s>", "<unk>", *words])}
    lines = ["\\data\\", *(f"ngram {k}={len(g)}" for k, g in enumerate(grams, start=1)), ""]
    for k, order_grams in enumerate(grams, start=1):
        lines.append(f"\\{k}-grams:")
        for gram in sorted(order_grams, key=lambda gram: [rank[w] for w in gram]):
            line = f"{rng.uniform(-2.5, -0.05):.6f}\t{' '.join(gram)}"
            if k < order and gram[-1] not in ("</s>", "<unk>"):  # <unk> as IRSTLM writes it: no back-off
                line += f"\t{rng.uniform(-1.0, 0.3):.6f}"
            lines.append(line)
        lines.append("")
    lines.append("\\end\\")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_counted_arpa(path: Path, sentences: Sequence[Sequence[str]], order: int) -> Path:
    """Writes the maximum-likelihood `order`-gram LM of `sentences` (each n-gram's count over its history's, a
    back-off of log10 0.1 everywhere, <unk> at log10 1e-5): a strong LM of exactly these sentences."""
    counts: list[Counter] = [Counter() for _ in range(order)]
    for sentence in sentences:
        words = ["<s>", *sentence, "</s>"]
        for k in range(1, order + 1):
            counts[k - 1].update(tuple(words[i : i + k]) for i in range(len(words) - k + 1))
    history_counts = Counter()
    for k in range(order):
        for gram, count in counts[k].items():
            history_counts[gram[:-1]] += count
    words, probs, backoffs = [], [], []
    for k in range(order):
        grams = sorted(counts[k]) + ([("<unk>",)] if k == 0 else [])
        words.append(grams)
        probs.append([math.log10(counts[k][g] / history_counts[g[:-1]]) if g in counts[k] else -5.0 for g in grams])
        backoffs.append([-1.0 if k + 1 < order else 0.0 for _ in grams])
    arpa = ArpaNgrams(str(path), words, probs, backoffs, [[0] * len(g) for g in words])
    path.write_text(arpa_text(arpa), encoding="utf-8")
    return path
