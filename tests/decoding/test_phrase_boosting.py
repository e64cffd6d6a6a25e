"""Phrase boosting: the tensor Aho-Corasick scorer against a plain-Python dict-trie reference (float64) on random
phrase sets, hand-worked scores, 10,000 phrases, the hotwords file reader and its errors."""

from __future__ import annotations

import random
import time

import pytest
import torch

from asr_plugin.decoding.phrase_boosting import Phrase, PhraseBoosting, PhraseGraph, read_hotwords
from asr_plugin.text.tokenizer import train_tokenizer

TEXTS = ["HELLO WORLD", "THE CAT SAT ON THE MAT", "A DOG AND A CAT", "WORDS OF THE WORLD", "HELLO THERE"] * 4


def reference_totals(phrases: list[tuple[tuple[int, ...], float]], sequence: list[int]) -> list[float]:
    """The boosting total after each prefix of `sequence` (index 0: empty) and at its end (last item), float64:
    the bonuses of every phrase occurrence completed so far plus the bonus of the open match, the longest suffix
    that is a phrase prefix and can still grow (a completed phrase that no longer phrase continues is closed)."""
    token_score: dict[tuple[int, ...], float] = {}
    for tokens, score in phrases:
        for j in range(1, len(tokens) + 1):
            token_score[tokens[:j]] = max(token_score.get(tokens[:j], score), score)

    def bonus(prefix: tuple[int, ...]) -> float:
        return sum(token_score[prefix[:j]] for j in range(1, len(prefix) + 1))

    whole = {tokens for tokens, _ in phrases}
    grows = {prefix[:-1] for prefix in token_score}
    totals, completed = [0.0], 0.0
    for i in range(1, len(sequence) + 1):
        seen = tuple(sequence[:i])
        completed += sum(bonus(p) for p in whole if seen[-len(p) :] == p and len(p) <= i)
        open_match = next(
            (
                seen[k:]
                for k in range(i + 1)
                if seen[k:] in grows or (seen[k:] in token_score and seen[k:] not in whole)
            ),
            (),
        )
        totals.append(completed + bonus(open_match))
    totals.append(completed)  # the end: the open match's bonus taken back
    return totals


def scorer_totals(scorer: PhraseBoosting, sequences: list[list[int]]) -> list[list[float]]:
    """The same totals by the scorer, all sequences as one batch (blank 0 interleaved: it must change nothing)."""
    states = scorer.initial_states(len(sequences), torch.device("cpu"))
    totals = [[0.0] for _ in sequences]
    for i in range(max(map(len, sequences))):
        scores, after = scorer.advance(states)
        assert scores[:, 0].eq(0).all() and after[:, 0].equal(states)
        token = torch.tensor([s[i] if i < len(s) else 0 for s in sequences])
        step = scores.gather(1, token[:, None]).squeeze(1).double()
        states = after.gather(1, token[:, None]).squeeze(1)
        for b, s in enumerate(sequences):
            if i < len(s):
                totals[b].append(totals[b][-1] + float(step[b]))
    final = scorer.final(states).double()
    return [t + [t[-1] + float(final[b])] for b, t in enumerate(totals)]


@pytest.mark.parametrize("seed", range(6))
def test_the_tensor_graph_scores_as_the_dict_trie_reference(seed: int) -> None:
    rng = random.Random(seed)
    vocab = 6
    phrases = [
        (tuple(rng.randrange(1, vocab) for _ in range(rng.randint(1, 4))), rng.choice([0.5, 1.0, 2.0]))
        for _ in range(rng.randint(1, 8))
    ]
    scorer = PhraseBoosting(PhraseGraph.build(phrases, vocab))
    sequences = []
    for _ in range(40):  # random sequences salted with the phrases themselves, so matches happen and fail
        seq: list[int] = []
        while len(seq) < 12:
            seq += (
                list(rng.choice(phrases)[0])[: rng.randint(1, 4)] if rng.random() < 0.6 else [rng.randrange(1, vocab)]
            )
        sequences.append(seq)
    for got, seq in zip(scorer_totals(scorer, sequences), sequences, strict=True):
        assert got == pytest.approx(reference_totals(phrases, seq), abs=1e-5), (phrases, seq)


def test_hand_worked_scores_of_one_phrase() -> None:
    scorer = PhraseBoosting(PhraseGraph.build([((1, 2, 3), 2.0)], 5))
    # each token of the phrase earns 2; the failing token gives the 4 back; a complete phrase keeps its 6
    assert scorer_totals(scorer, [[1, 2, 3, 4], [1, 2, 4], [1, 2], [4, 1, 2, 1, 2, 3]]) == [
        [0, 2, 4, 6, 6, 6],
        [0, 2, 4, 0, 0],
        [0, 2, 4, 0],
        [0, 0, 2, 4, 2, 4, 6, 6],
    ]


def test_ten_thousand_phrases_build_in_seconds_and_score_a_batch() -> None:
    rng = random.Random(0)
    vocab = 500
    phrases = [(tuple(rng.randrange(1, vocab) for _ in range(rng.randint(1, 5))), 1.5) for _ in range(10_000)]
    start = time.perf_counter()
    scorer = PhraseBoosting(PhraseGraph.build(phrases, vocab))
    assert time.perf_counter() - start < 20  # a second or two unloaded
    graph = scorer.graph  # sparse: a few exceptions to the root's row per state (here 16), not states x V
    assert len(graph.row_tokens) < graph.num_states * vocab // 20 and graph.row_start[-1] == len(graph.row_tokens)
    sequences = [list(phrases[i][0]) + list(phrases[i + 1][0]) + [7] for i in range(0, 32, 2)]  # batch 16
    for got, seq in zip(scorer_totals(scorer, sequences), sequences, strict=True):
        assert got == pytest.approx(reference_totals(phrases, seq), abs=1e-4)


@pytest.fixture(scope="module")
def spm_tokenizer(tmp_path_factory):
    return train_tokenizer(TEXTS, tmp_path_factory.mktemp("boost") / "bpe.model", vocab_size=40)


def test_phrases_are_tokenised_with_the_models_tokenizer(spm_tokenizer) -> None:
    scorer = PhraseBoosting.from_phrases(["hello world", Phrase("cat", 3.0)], spm_tokenizer, hotwords_score=1.0)
    hello, cat = spm_tokenizer.encode("HELLO WORLD"), spm_tokenizer.encode("CAT")
    assert scorer.vocab_size == spm_tokenizer.vocab_size
    reference = reference_totals([(tuple(hello), 1.0), (tuple(cat), 3.0)], hello + cat)
    assert scorer_totals(scorer, [hello + cat])[0] == pytest.approx(reference)
    assert reference[-1] == pytest.approx(len(hello) * 1.0 + len(cat) * 3.0)


def test_the_hotwords_file_format_of_sherpa_onnx(tmp_path, spm_tokenizer) -> None:
    path = tmp_path / "hotwords.txt"
    path.write_text("HELLO WORLD :2.5\n\n  the   cat\nDOG :1\n", encoding="utf-8")
    assert read_hotwords(path) == [
        Phrase("HELLO WORLD", 2.5, f"{path}:1"),
        Phrase("the cat", None, f"{path}:3"),
        Phrase("DOG", 1.0, f"{path}:4"),
    ]
    scorer = PhraseBoosting.from_file(path, spm_tokenizer, hotwords_score=0.5)
    dog = spm_tokenizer.encode("DOG")
    assert scorer_totals(scorer, [dog])[0][-1] == pytest.approx(len(dog) * 1.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("HELLO :x\n", r"hotwords.txt:1: the score ':x' of 'HELLO :x' is not a number"),
        ("HELLO :1 WORLD\n", r"hotwords.txt:1: words after the score"),
        (":2\n", r"hotwords.txt:1: a score without a phrase"),
        ("CAT\nHELLO :nan\n", r"hotwords.txt:2: phrase 'HELLO': its score is nan"),
        ("HELLO :-1\n", r"hotwords.txt:1: phrase 'HELLO': its score is -1.0: a boosting score must be .* > 0"),
        ("HELLO :inf\n", r"its score is inf"),
        ("CAT\nQUIZ\n", r"hotwords.txt:2: phrase 'QUIZ': the tokenizer cannot spell 'QUIZ'"),
        ("CAT\n!!!\n", r"hotwords.txt:2: phrase '!!!' is empty once normalised"),
        ("\n  \n", r"hotwords.txt: no phrases"),
    ],
)
def test_bad_hotwords_are_refused_naming_file_line_and_phrase(tmp_path, spm_tokenizer, text, message) -> None:
    path = tmp_path / "hotwords.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        PhraseBoosting.from_file(path, spm_tokenizer)


def test_bad_phrase_lists_and_scores_are_refused(spm_tokenizer) -> None:
    with pytest.raises(ValueError, match="no phrases to boost"):
        PhraseBoosting.from_phrases([], spm_tokenizer)
    with pytest.raises(ValueError, match=r"hotwords_score is nan"):
        PhraseBoosting.from_phrases(["CAT"], spm_tokenizer, hotwords_score=float("nan"))
    with pytest.raises(ValueError, match=r"hotwords_score is 0"):
        PhraseBoosting.from_phrases(["CAT"], spm_tokenizer, hotwords_score=0)
    with pytest.raises(ValueError, match=r"phrase 1: tokens \[\] must be non-empty ids in \[1, 5\)"):
        PhraseGraph.build([((1,), 1.0), ((), 1.0)], 5)
