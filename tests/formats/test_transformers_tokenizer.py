"""A transformers Parakeet tokenizer.json (made by transformers' own conversion of a NeMo-like SentencePiece
model, BPE and Unigram) converted back to SentencePiece (asr_plugin.formats.transformers_tokenizer): every random
text encodes and decodes as `tokenizers` does it; what SentencePiece would do differently is refused by name."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("transformers.models.parakeet")

import sentencepiece as spm  # noqa: E402
from tokenizers import Tokenizer as HfTokenizer  # noqa: E402
from transformers_models import save_tokenizer, train_sentencepiece  # noqa: E402

from asr_plugin.formats.transformers_tokenizer import read_parakeet_tokenizer, sentencepiece_model  # noqa: E402

ALPHABET = "abcdefghijklmnopqrstuvwxyz'"


def _words(generator: random.Random, count: int) -> list[str]:
    return ["".join(generator.choices(ALPHABET, k=generator.randint(2, 9))) for _ in range(count)]


def _converted(model_type: str, directory):
    """(`directory` with transformers' tokenizer.json of a `model_type` SentencePiece model, that model, its piece
    count)."""
    generator = random.Random(0)
    words = _words(generator, 60)
    lines = [" ".join(generator.choices(words, k=generator.randint(4, 12))) for _ in range(400)]
    original = train_sentencepiece(lines, 150, model_type)
    save_tokenizer(original, directory)
    return directory, original, spm.SentencePieceProcessor(model_proto=original).get_piece_size()


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def converted(request, tmp_path_factory):
    return _converted(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return _converted("bpe", tmp_path_factory.mktemp("bpe"))


def _random_texts(count: int, seed: int = 1) -> list[str]:
    """Texts of known words, unseen letter strings and stray spaces (leading, trailing, runs)."""
    generator = random.Random(seed)
    words = _words(random.Random(0), 60)
    texts = []
    for _ in range(count):
        parts = [generator.choice(words) if generator.random() < 0.6 else _words(generator, 1)[0] for _ in range(8)]
        texts.append("".join(p + " " * generator.choice([1, 1, 1, 2, 3]) for p in parts)[: generator.randint(0, 60)])
    return [(" " if generator.random() < 0.2 else "") + text for text in texts]


def test_random_texts_encode_and_decode_as_tokenizers_does(converted):
    directory, original, pieces = converted
    theirs = HfTokenizer.from_file(str(directory / "tokenizer.json"))
    ours = spm.SentencePieceProcessor(model_proto=sentencepiece_model(directory / "tokenizer.json", pieces))
    nemo = spm.SentencePieceProcessor(model_proto=original)
    lengths = set()
    for text in _random_texts(1000):
        expected = theirs.encode(text).ids
        assert ours.encode(text) == expected == nemo.encode(text), repr(text)
        assert ours.decode(expected) == theirs.decode(expected), repr(text)
        lengths.add(len(expected))
    assert len(lengths) > 10  # texts of many lengths, not all empty


def test_the_tokenizer_has_our_blank_policy(converted):
    directory, _, pieces = converted
    tokenizer = read_parakeet_tokenizer(directory, pieces + 1)
    theirs = HfTokenizer.from_file(str(directory / "tokenizer.json"))
    assert tokenizer.vocab_size == pieces + 1 and tokenizer.convention == "nemo"
    text = _random_texts(1)[0].strip() or "ab"
    assert tokenizer.encode(tokenizer.normalize(text)) == [i + 1 for i in theirs.encode(tokenizer.normalize(text)).ids]


def _edited(directory, tmp_path, edit):
    node = json.loads((directory / "tokenizer.json").read_text())
    edit(node)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(node))
    return path


def _first_merge_at_the_end(node):
    node["model"]["merges"].append(node["model"]["merges"][0])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda n: n["model"].update(type="WordPiece"), "model type 'WordPiece'"),
        (lambda n: n.update(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer 'Whitespace'"),
        (lambda n: n.update(normalizer={"type": "Lowercase"}), "normalizer 'Lowercase' is not SentencePiece's"),
        (lambda n: n["added_tokens"][0].update(special=False), "user-defined token '<unk>'"),
        (lambda n: n.update(post_processor={"type": "BertProcessing"}), "post_processor 'BertProcessing' adds"),
    ],
)
def test_what_sentencepiece_does_differently_is_refused(converted, tmp_path, edit, message):
    directory, _, pieces = converted
    with pytest.raises(ValueError, match=message):
        sentencepiece_model(_edited(directory, tmp_path, edit), pieces)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda n: n["model"]["merges"].pop(0), "no merge joins .* which SentencePiece would join"),
        (_first_merge_at_the_end, "are not consecutive"),
        (lambda n: n["model"].update(fuse_unk=False), "fuse_unk=False"),
    ],
)
def test_bpe_merges_sentencepiece_would_order_differently_are_refused(bpe, tmp_path, edit, message):
    directory, _, pieces = bpe
    with pytest.raises(ValueError, match=message):
        sentencepiece_model(_edited(directory, tmp_path, edit), pieces)


def test_a_vocabulary_of_another_size_is_refused(converted):
    directory, _, pieces = converted
    with pytest.raises(ValueError, match="vocab_size - 1"):
        sentencepiece_model(directory / "tokenizer.json", pieces + 3)
