"""Random ARPA files for the n-gram LM tests: every n-gram (up to the order) of random sentences, so each n-gram's
prefix and suffix are in the file too (as in any ARPA file an estimator writes), with random log10 probabilities and
back-off weights (unnormalised: kenlm and our reader only look the numbers up)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path


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
