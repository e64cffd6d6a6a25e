"""NgramLM (an ARPA file as a batched TokenScorer) against kenlm, a hand-worked back-off chain, and its refusals."""

from __future__ import annotations

import math
import random

import pytest
import torch

from asr_plugin.decoding.arpa_reader import read_arpa
from asr_plugin.decoding.fusion import TokenScorer
from asr_plugin.decoding.ngram_build import arpa_text, within_sentences
from asr_plugin.decoding.ngram_lm import NgramLM, lm_fusion
from tests.decoding.random_arpa import write_random_arpa

# token 0 the blank, 1 SentencePiece's <unk>; "▁Z" is a token no ARPA below has (it scores as <unk>)
PIECES = ["<blk>", "<unk>", "▁A", "▁B", "C", "▁DOG", "S", "▁Z"]
FILE_WORDS = PIECES[2:-1]
CPU = torch.device("cpu")


def ours_along(lm: NgramLM, tokens: list[int]) -> list[float]:
    """Natural-log score of each token after <s>, then of </s>, from one state at a time."""
    states, scores = lm.initial_states(1, CPU), []
    for token in tokens:
        token_scores, next_states = lm.advance(states)
        scores.append(float(token_scores[0, token]))
        states = next_states[:, token]
    return [*scores, float(lm.final(states)[0])]


@pytest.mark.parametrize("dense_limit", [0, 1 << 22], ids=["lazy", "dense"])
@pytest.mark.parametrize("order", [2, 3, 4])
def test_scores_equal_kenlm_full_scores(tmp_path, order, dense_limit):
    kenlm = pytest.importorskip("kenlm")
    path = write_random_arpa(tmp_path / "lm.arpa", FILE_WORDS, order, seed=order)
    lm = NgramLM.from_arpa(path, PIECES, dense_limit=dense_limit)
    assert isinstance(lm, TokenScorer) and lm.order == order
    assert ("dense_scores" in lm._t) == (dense_limit > 0)
    reference = kenlm.Model(str(path))
    rng = random.Random(order)
    for _ in range(60):
        tokens = [rng.randrange(1, len(PIECES)) for _ in range(rng.randint(0, 12))]
        expected = [s * math.log(10) for s, _, _ in reference.full_scores(" ".join(PIECES[t] for t in tokens))]
        assert ours_along(lm, tokens) == pytest.approx(expected, abs=1e-5), tokens


def test_nemo_words_are_detected_and_score_as_pieces(tmp_path):
    """NeMo's chr(k + 100) for its token k (our k + 1) scores as the same file spelled with pieces."""
    nemo_words = [chr(100 + PIECES.index(piece) - 1) for piece in FILE_WORDS]
    pieces_lm = NgramLM.from_arpa(write_random_arpa(tmp_path / "p.arpa", FILE_WORDS, 3, seed=5), PIECES)
    nemo_lm = NgramLM.from_arpa(write_random_arpa(tmp_path / "n.arpa", nemo_words, 3, seed=5), PIECES)
    states = torch.arange(pieces_lm.num_states)
    assert nemo_lm.num_states == pieces_lm.num_states
    for ours, theirs in zip(pieces_lm.advance(states), nemo_lm.advance(states)):
        assert torch.equal(ours, theirs)
    with pytest.raises(ValueError, match=r"n\.arpa.*words='pieces'"):
        NgramLM.from_arpa(tmp_path / "n.arpa", PIECES, words="pieces")


BACKOFF_ARPA = """\\data\\
ngram 1=6
ngram 2=4
ngram 3=2

\\1-grams:
-1.0\t<s>\t-0.5
-0.7\t</s>
-2.0\t<unk>
-0.4\t▁A\t-0.25
-0.6\t▁B\t-0.125
-0.9\tC\t-0.0625

\\2-grams:
-0.3\t<s> ▁A\t-0.2
-0.2\t▁A ▁B\t-0.1
-0.15\t▁B C\t-0.3
-0.05\t▁B </s>

\\3-grams:
-0.01\t<s> ▁A ▁B
-0.02\t▁A ▁B ▁A

\\end\\
"""


def test_back_off_chain_by_hand(tmp_path):
    """Scores (log10 here, by hand) and next states of a 3-gram through two back-off steps."""
    path = tmp_path / "backoff.arpa"
    path.write_text(BACKOFF_ARPA, encoding="utf-8")
    lm = NgramLM.from_arpa(path, PIECES, dense_limit=0)
    a, b, c, z = (PIECES.index(p) for p in ("▁A", "▁B", "C", "▁Z"))
    # <s> A B C A Z </s>
    expected_log10 = [
        -0.3,  # <s> A
        -0.01,  # <s> A B
        -0.1 + -0.15,  # A B C is absent: bo(A B) + p(B C)
        -0.3 + -0.0625 + -0.4,  # B C A and C A absent: bo(B C) + bo(C) + p(A)
        -0.25 + -2.0,  # Z is no word of the file: bo(A) + p(<unk>)
        -0.7,  # <unk> </s> absent, the empty history has no back-off: p(</s>)
    ]
    assert ours_along(lm, [a, b, c, a, z]) == pytest.approx([x * math.log(10) for x in expected_log10], abs=1e-6)
    # the next state is the longest suffix that is a history: "<s> A B C" and "B C" reach the same state
    start = lm.initial_states(1, CPU)

    def state_after(tokens, states):
        for token in tokens:
            states = lm.advance(states)[1][:, token]
        return states

    assert torch.equal(state_after([a, b, c], start), state_after([b, c], start))
    assert not torch.equal(state_after([a, b], start), state_after([b], start))  # "A B" is a history
    # the blank: score 0, same state; final backs off too: "A B </s>" absent, "B </s>" present
    states = state_after([a, b], start)
    scores, next_states = lm.advance(states)
    assert float(scores[0, 0]) == 0.0 and torch.equal(next_states[:, 0], states)
    assert float(lm.final(states)[0]) == pytest.approx((-0.1 + -0.05) * math.log(10), abs=1e-6)


def test_batched_advance_equals_one_state_at_a_time(tmp_path):
    lm = NgramLM.from_arpa(write_random_arpa(tmp_path / "lm.arpa", FILE_WORDS, 3, seed=9), PIECES, dense_limit=0)
    states = torch.randint(0, lm.num_states, (17,))
    scores, next_states = lm.advance(states)
    assert scores.shape == next_states.shape == (17, len(PIECES))
    assert scores.dtype == torch.float32 and next_states.dtype == torch.int64
    for row, state in enumerate(states):
        one_scores, one_next = lm.advance(state[None])
        assert torch.equal(one_scores[0], scores[row]) and torch.equal(one_next[0], next_states[row])
    assert lm.memory_bytes() == 20 * lm.num_arcs + 16 * lm.num_states + 8 * len(PIECES) + 8


def _refusal(tmp_path, text: str, match: str, **kwargs):
    path = tmp_path / "bad.arpa"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        NgramLM.from_arpa(path, PIECES, **kwargs)


def test_malformed_line_named_with_file_and_line(tmp_path):
    _refusal(
        tmp_path,
        BACKOFF_ARPA.replace("-0.15\t▁B C\t-0.3", "-0.15\t▁B C\t-0.3\tX"),
        r"bad\.arpa, line 17: a 2-gram line has 5 fields, not 3 or 4",
    )
    _refusal(tmp_path, BACKOFF_ARPA.replace("-0.6\t▁B", "minus\t▁B"), r"bad\.arpa, line 11: weight 'minus'")
    _refusal(tmp_path, "ngram 1=1\n", r"bad\.arpa, line 1: expected \\data\\")
    _refusal(tmp_path, BACKOFF_ARPA.replace("\\end\\\n", ""), r"bad\.arpa: ends without \\end\\")


def test_count_mismatch_with_header(tmp_path):
    _refusal(
        tmp_path,
        BACKOFF_ARPA.replace("ngram 2=4", "ngram 2=5"),
        r"line 20: section \\2-grams: has 4 n-grams, the \\data\\ header says 5",
    )


def test_nan_weight_named(tmp_path):
    _refusal(
        tmp_path,
        BACKOFF_ARPA.replace("-0.2\t▁A ▁B\t-0.1", "-0.2\t▁A ▁B\tnan"),
        r"bad\.arpa, line 16: weight 'nan' is not a log10",
    )


def test_file_over_the_size_limit_refused_before_reading(tmp_path):
    _refusal(tmp_path, BACKOFF_ARPA, r"bad\.arpa: \d+ bytes, over the limit max_bytes=100", max_bytes=100)


def test_words_of_another_vocabulary_named(tmp_path):
    other = BACKOFF_ARPA.replace("ngram 1=6", "ngram 1=12") + ""
    extra = "".join(f"-1.0\tW{i}\n" for i in range(6))
    _refusal(
        tmp_path,
        other.replace("-0.9\tC\t-0.0625\n", f"-0.9\tC\t-0.0625\n{extra}"),
        r"6 of its 1-gram words name no token.*'W0', 'W1', 'W2', 'W3', 'W4': an LM of another vocabulary",
    )


def test_history_missing_from_the_file_refused(tmp_path):
    _refusal(
        tmp_path, BACKOFF_ARPA.replace("-0.02\t▁A ▁B ▁A", "-0.02\t▁B ▁B ▁A"), r"line 22: its history is not a 2-gram"
    )


class PieceTable:
    """The tokenizer side lm_fusion reads: V, the blank, each id's piece."""

    vocab_size, blank_id = len(PIECES), 0

    def id_to_piece(self, token_id: int) -> str:
        return PIECES[token_id]


def test_lm_fusion_of_the_options(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_text(BACKOFF_ARPA, encoding="utf-8")
    assert lm_fusion(None, 0.3, PieceTable()) == []
    (entry,) = lm_fusion(path, 0.25, PieceTable())
    assert entry.weight == 0.25 and isinstance(entry.scorer, NgramLM) and entry.scorer.vocab_size == len(PIECES)
    for weight in (float("nan"), float("inf"), "0.3", True):
        with pytest.raises(ValueError, match=r"decoding\.lm\.weight=.*a finite number"):
            lm_fusion(path, weight, PieceTable())
    with pytest.raises(FileNotFoundError, match=r"--lm=.*missing\.arpa: no such ARPA file"):
        lm_fusion(tmp_path / "missing.arpa", 0.3, PieceTable(), names=("--lm", "--lm-weight"))


def test_ngrams_across_sentence_boundaries_dropped_scores_kept(tmp_path):
    """IRSTLM's "<s> <s>" n-grams (and any across </s>) go; every sentence's score stays."""
    with_boundaries = BACKOFF_ARPA.replace("ngram 2=4", "ngram 2=6").replace("ngram 3=2", "ngram 3=3")
    with_boundaries = with_boundaries.replace(
        "-0.3\t<s> ▁A\t-0.2", "-0.3\t<s> ▁A\t-0.2\n-1.5\t<s> <s>\t-0.4\n-1.1\t</s> ▁A"
    )
    with_boundaries = with_boundaries.replace("-0.01\t<s> ▁A ▁B", "-0.01\t<s> ▁A ▁B\n-0.7\t<s> <s> ▁A")
    source, cleaned = tmp_path / "irstlm.arpa", tmp_path / "clean.arpa"
    source.write_text(with_boundaries, encoding="utf-8")
    arpa = within_sentences(read_arpa(source))
    assert [len(grams) for grams in arpa.words] == [6, 4, 2]
    cleaned.write_text(arpa_text(arpa), encoding="utf-8")
    assert read_arpa(cleaned).words == arpa.words
    before, after = NgramLM.from_arpa(source, PIECES), NgramLM.from_arpa(cleaned, PIECES)
    rng = random.Random(3)
    for _ in range(20):
        tokens = [rng.randrange(1, len(PIECES)) for _ in range(rng.randint(0, 6))]
        assert ours_along(after, tokens) == pytest.approx(ours_along(before, tokens), abs=1e-6)
