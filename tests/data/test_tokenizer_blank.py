"""SentencePiece tokenizer: training, blank id 0 policy, encode/decode, normalisation."""

from __future__ import annotations

import pickle

import pytest
import sentencepiece as spm

from asr_plugin.data import BLANK_ID, Tokenizer, normalize_text, train_tokenizer
from asr_plugin.data.mini_corpus import plan_corpus

TEXTS = [utt.text for utts in plan_corpus(300, 10, 10, seed=1).values() for utt in utts]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return train_tokenizer(TEXTS, tmp_path_factory.mktemp("tok") / "bpe64.model", vocab_size=64)


def test_blank_policy(bpe):
    assert bpe.blank_id == BLANK_ID == 0
    assert bpe.vocab_size == 64
    assert bpe.id_to_piece(0) == "<blk>" and bpe.id_to_piece(1) == "<unk>"
    for text in TEXTS:
        ids = bpe.encode(text)
        assert ids and 0 not in ids and max(ids) < bpe.vocab_size
    assert 0 not in bpe.encode("<blk> THE <blk>")  # the blank piece is a control symbol, never produced


def test_round_trip_and_blank_ignored(bpe):
    text = "THE RED CAT SEES THREE BIG DOGS"
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    with_blanks = [0] + [i for token in ids for i in (token, 0)]
    assert bpe.decode(with_blanks) == text
    assert bpe.decode([]) == ""


def test_normalisation_is_librispeech_style(bpe):
    assert normalize_text("  the red, cat!  it's\tfine. ") == "THE RED CAT IT'S FINE"
    assert bpe.encode("the red cat.") == bpe.encode("THE RED CAT")


def test_unigram_and_pickle(tmp_path):
    tok = train_tokenizer(TEXTS, tmp_path / "uni.model", vocab_size=60, model_type="unigram")
    assert tok.vocab_size == 60 and tok.id_to_piece(0) == "<blk>"
    clone = pickle.loads(pickle.dumps(tok))
    assert clone.encode("MY CAT IS RED") == tok.encode("MY CAT IS RED")
    assert (tmp_path / "uni.vocab").exists()


def test_errors(tmp_path, bpe):
    with pytest.raises(FileExistsError, match="overwrite"):
        train_tokenizer(TEXTS, bpe.model_path, vocab_size=64)
    with pytest.raises(ValueError, match="model_type"):
        train_tokenizer(TEXTS, tmp_path / "x.model", vocab_size=64, model_type="word")
    with pytest.raises(ValueError, match="no non-empty sentence"):
        train_tokenizer(["", "  ,"], tmp_path / "x.model", vocab_size=64)
    with pytest.raises(FileNotFoundError):
        Tokenizer(tmp_path / "missing.model")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS), model_prefix=str(tmp_path / "plain"),
                                   vocab_size=60, minloglevel=2)
    with pytest.raises(ValueError, match="id 0 is '<unk>'"):
        Tokenizer(tmp_path / "plain.model")
