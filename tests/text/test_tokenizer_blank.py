"""SentencePiece tokenizer: training, blank id 0 in both conventions (ours and NeMo's), encode/decode against
SentencePiece itself, the checkpoint record, and text normalisation."""

from __future__ import annotations

import hashlib
import io
import pickle

import pytest
import sentencepiece as spm
import torch

from asr_plugin.data.demo.corpus import plan_corpus
from asr_plugin.formats.nemo import NemoTokenizer
from asr_plugin.text import BLANK_ID, LIBRISPEECH_NORMALIZER, TextNormalizer, Tokenizer, train_tokenizer

TEXTS = [utt.text for utts in plan_corpus(300, 10, 10, seed=1).values() for utt in utts]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return train_tokenizer(TEXTS, tmp_path_factory.mktemp("tok") / "bpe64.model", vocab_size=64)


@pytest.fixture(scope="module")
def nemo_model(tmp_path_factory) -> bytes:
    """A lower-case SentencePiece model without a blank, as NeMo trains them (bytes of its .model file)."""
    prefix = tmp_path_factory.mktemp("nemo") / "tokenizer"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(t.lower() for t in TEXTS),
        model_prefix=str(prefix),
        vocab_size=60,
        model_type="bpe",
        character_coverage=1.0,
        minloglevel=2,
    )
    return prefix.with_suffix(".model").read_bytes()


def _through_checkpoint(record: dict) -> dict:
    """`record` saved and loaded as a checkpoint entry is (torch.load with weights_only=True)."""
    buffer = io.BytesIO()
    torch.save({"tokenizer": record}, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)["tokenizer"]


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


def test_our_ids_are_sentencepiece_ids(bpe, tmp_path):
    sp = spm.SentencePieceProcessor(model_proto=bpe.model_bytes)
    for text in TEXTS[:50]:
        assert bpe.encode(text.lower()) == sp.encode(text.upper())  # normalised to upper case first


def test_normalisation_is_librispeech_style(bpe):
    assert bpe.normalize("  the red, cat!  it's\tfine. ") == "THE RED CAT IT'S FINE"
    assert bpe.encode("the red cat.") == bpe.encode("THE RED CAT")
    assert bpe.normalizer == LIBRISPEECH_NORMALIZER


def test_accented_letters_map_to_base_letters_and_are_counted():
    text, counts = LIBRISPEECH_NORMALIZER.normalize_counted("Café naïve, Søren — ÆSIR ﬁne!")
    # é ï ø Æ (-> AE) ﬁ (upper-cased to FI, not counted) are letters; "," "—" "!" are dropped
    assert text == "CAFE NAIVE SOREN AESIR FINE"
    assert (counts.mapped, counts.dropped, counts.texts, counts.total) == (4, 3, 1, 1)
    same, nothing = LIBRISPEECH_NORMALIZER.normalize_counted("ALREADY CLEAN TEXT")
    assert same == "ALREADY CLEAN TEXT" and nothing.changed == 0 and nothing.texts == 0
    texts, total = LIBRISPEECH_NORMALIZER.normalize_all(["É", "OK", "日本"])
    assert texts == ["E", "OK", ""] and (total.mapped, total.dropped, total.texts, total.total) == (1, 2, 2, 3)
    assert "2 of 3 transcripts changed" in total.describe()
    # a base letter outside the alphabet is not a mapping: lower case keeps "é" when the alphabet has it
    french = TextNormalizer("lower", "abcdefghijklmnopqrstuvwxyzé'")
    assert french("CAFÉ NAÏVE") == "café naive"


def test_normaliser_record_and_errors():
    normalizer = TextNormalizer(None, "aB '")
    assert normalizer.characters == "'Ba" and TextNormalizer.from_record(normalizer.record()) == normalizer
    with pytest.raises(ValueError, match="case must be one of"):
        TextNormalizer("title", "abc")
    with pytest.raises(ValueError, match="non-empty"):
        TextNormalizer("lower", "  ")
    with pytest.raises(ValueError, match="exactly the keys"):
        TextNormalizer.from_record({"case": "lower"})


def test_nemo_convention_prepends_the_blank(nemo_model):
    sp = spm.SentencePieceProcessor(model_proto=nemo_model)
    tokenizer = Tokenizer(nemo_model, convention="nemo")
    assert tokenizer.vocab_size == sp.get_piece_size() + 1 == 61 and tokenizer.blank_id == 0
    assert tokenizer.normalizer.case == "lower"
    assert set(tokenizer.normalizer.characters) <= set("abcdefghijklmnopqrstuvwxyz'")
    for text in TEXTS[:50]:
        assert tokenizer.encode(text) == [i + 1 for i in sp.encode(text.lower())]  # upper-case text lower-cased
        assert tokenizer.decode([0, *tokenizer.encode(text), 0]) == text.lower()
    assert tokenizer.id_to_piece(0) == "<blk>" and tokenizer.id_to_piece(1) == sp.id_to_piece(0)
    assert tokenizer.normalize("THE CAFÉ, 1990!") == "the cafe"  # no digits in this vocabulary: dropped
    nemo = NemoTokenizer(nemo_model)
    assert nemo == tokenizer and pickle.loads(pickle.dumps(nemo)) == nemo
    assert type(pickle.loads(pickle.dumps(nemo))) is NemoTokenizer


@pytest.mark.parametrize("convention", ["asr_plugin", "nemo"])
def test_record_round_trip_through_a_checkpoint(convention, bpe, nemo_model):
    tokenizer = bpe if convention == "asr_plugin" else Tokenizer(nemo_model, convention="nemo")
    record = _through_checkpoint(tokenizer.record())
    assert sorted(record) == ["blank_id", "convention", "model", "normalization", "sha256", "vocab_size"]
    assert record["convention"] == convention and record["blank_id"] == 0
    assert record["vocab_size"] == tokenizer.vocab_size and isinstance(record["model"], bytes)
    assert record["sha256"] == hashlib.sha256(record["model"]).hexdigest() == tokenizer.sha256
    rebuilt = Tokenizer.from_record(record)
    assert rebuilt == tokenizer and rebuilt.convention == convention
    for text in TEXTS[:20]:
        assert rebuilt.encode(text) == tokenizer.encode(text)
    assert [rebuilt.id_to_piece(i) for i in range(rebuilt.vocab_size)] == [
        tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)
    ]


def test_records_that_do_not_match_are_refused(bpe, nemo_model):
    record = bpe.record()
    with pytest.raises(ValueError, match="sha256"):
        Tokenizer.from_record({**record, "model": record["model"][:-1] + bytes([record["model"][-1] ^ 1])})
    with pytest.raises(ValueError, match="vocab_size is 65"):
        Tokenizer.from_record({**record, "vocab_size": 65})
    with pytest.raises(ValueError, match="the keys"):
        Tokenizer.from_record({k: v for k, v in record.items() if k != "sha256"})
    with pytest.raises(ValueError, match="must be bytes"):
        Tokenizer.from_record({**record, "model": "not bytes"})
    with pytest.raises(ValueError, match="convention must be one of"):
        Tokenizer.from_record({**record, "convention": "espnet"})
    # a NeMo model (no blank piece at id 0) is not a tokenizer of ours
    with pytest.raises(ValueError, match="convention='nemo'"):
        Tokenizer.from_record(
            {**Tokenizer(nemo_model, convention="nemo").record(), "convention": "asr_plugin", "vocab_size": 60}
        )


def test_unigram_and_pickle(tmp_path):
    tok = train_tokenizer(TEXTS, tmp_path / "uni.model", vocab_size=60, model_type="unigram")
    assert tok.vocab_size == 60 and tok.id_to_piece(0) == "<blk>"
    clone = pickle.loads(pickle.dumps(tok))
    assert clone.encode("MY CAT IS RED") == tok.encode("MY CAT IS RED") and clone == tok
    pieces = [line.split("\t")[0] for line in (tmp_path / "uni.vocab").read_text().splitlines()]
    assert pieces == [tok.id_to_piece(i) for i in range(60)]
    assert Tokenizer(tmp_path / "uni.model") == tok


def test_errors(tmp_path, bpe):
    (tmp_path / "bpe64.model").write_bytes(bpe.model_bytes)
    with pytest.raises(FileExistsError, match="overwrite"):
        train_tokenizer(TEXTS, tmp_path / "bpe64.model", vocab_size=64)
    with pytest.raises(ValueError, match="model_type"):
        train_tokenizer(TEXTS, tmp_path / "x.model", vocab_size=64, model_type="word")
    with pytest.raises(ValueError, match="no non-empty sentence"):
        train_tokenizer(["", "  ,"], tmp_path / "x.model", vocab_size=64)
    with pytest.raises(FileNotFoundError):
        Tokenizer(tmp_path / "missing.model")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        Tokenizer(b"garbage bytes")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXTS), model_prefix=str(tmp_path / "plain"), vocab_size=60, minloglevel=2
    )
    with pytest.raises(ValueError, match="id 0 is '<unk>'"):
        Tokenizer(tmp_path / "plain.model")
