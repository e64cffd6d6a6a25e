"""The synthetic mini corpus: layout, unseen speakers, vocabulary, determinism, idempotence, and refusal to
touch foreign data."""

from __future__ import annotations

import hashlib

import pytest
import soundfile as sf
from data_helpers import SMALL

from asr_plugin.data import MINI_SPLITS, make_mini_librispeech, scan_split
from asr_plugin.data.mini_corpus import VARIANTS, plan_corpus, speakers
from asr_plugin.data.mini_grammar import vocabulary


def _digest(root):
    return {str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_layout_is_librispeech(mini_root):
    counts = {"train": SMALL["n_train"], "dev": SMALL["n_dev"], "test": SMALL["n_test"]}
    for split in MINI_SPLITS:
        candidates, skipped = scan_split(mini_root, split)
        assert not skipped and len(candidates) == counts[split]
        for candidate in candidates:
            speaker, chapter, _ = candidate.id.split("-")
            assert candidate.path.endswith(f"{split}/{speaker}/{chapter}/{candidate.id}.flac")
            info = sf.info(candidate.path)
            assert info.samplerate == 16000 and info.channels == 1 and info.format == "FLAC"
            assert 0.5 <= info.duration <= 5.0
            assert set(candidate.text.split()) <= set(vocabulary())


def test_splits_have_disjoint_sentences_and_unseen_speakers():
    plan = plan_corpus(3000, 200, 300, seed=0)
    sentences = {split: {utt.text for utt in utts} for split, utts in plan.items()}
    assert [len(sentences[s]) for s in MINI_SPLITS] == [3000, 200, 300]
    assert not sentences["train"] & sentences["dev"] and not sentences["train"] & sentences["test"]
    assert not sentences["dev"] & sentences["test"]
    heard = {split: {utt.speaker for utt in utts} for split, utts in plan.items()}
    assert heard["train"] == set(speakers(0)["train"]) and len(heard["train"]) >= 30  # every train voice speaks
    assert len(heard["test"]) == len(VARIANTS["test"]) and len(heard["dev"]) == len(VARIANTS["dev"])
    variant = {split: {spk.voice.split("+")[1] for spk in heard[split]} for split in MINI_SPLITS}
    assert not variant["train"] & variant["dev"] and not variant["train"] & variant["test"]
    assert not variant["dev"] & variant["test"]
    accents = {split: {spk.voice.split("+")[0] for spk in heard[split]} for split in MINI_SPLITS}
    assert accents["test"] <= accents["train"]  # new voices, accents that training has heard
    rates = [utt.rate for utt in plan["train"]]
    assert max(rates) - min(rates) > 50  # speakers and utterances differ in speaking rate


def test_vocabulary_is_large_and_covers_every_test_word():
    plan = plan_corpus(3000, 200, 300, seed=0)
    words = {split: {w for utt in utts for w in utt.text.split()} for split, utts in plan.items()}
    assert len(vocabulary()) >= 300 and words["train"] <= set(vocabulary())
    assert len(words["train"]) >= 300
    assert words["test"] <= words["train"]  # test needs no word training never spelled
    assert plan_corpus(30, 5, 5, seed=1) != plan_corpus(30, 5, 5, seed=2)


def test_deterministic_and_idempotent(mini_root, tmp_path):
    again = make_mini_librispeech(tmp_path / "again", **SMALL)
    assert _digest(again) == _digest(mini_root)  # same seed -> byte-identical corpus
    mtimes = {p: p.stat().st_mtime_ns for p in again.rglob("*") if p.is_file()}
    make_mini_librispeech(again, **SMALL)
    assert {p: p.stat().st_mtime_ns for p in again.rglob("*") if p.is_file()} == mtimes


def test_missing_file_is_regenerated_identically(mini_root, tmp_path):
    root = make_mini_librispeech(tmp_path / "c", **SMALL)
    victim = next(root.rglob("*.flac"))
    original = victim.read_bytes()
    victim.unlink()
    make_mini_librispeech(root, **SMALL)
    assert victim.read_bytes() == original


def test_refuses_foreign_or_different_roots(tmp_path, mini_root):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        make_mini_librispeech(foreign, n_train=2, n_dev=1, n_test=1)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    with pytest.raises(ValueError, match="made with"):
        make_mini_librispeech(mini_root, n_train=25, n_dev=8, n_test=8)
    with pytest.raises(ValueError, match="n_dev must be >= 1"):
        make_mini_librispeech(tmp_path / "x", n_train=2, n_dev=0, n_test=1)
