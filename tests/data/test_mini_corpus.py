"""The synthetic mini corpus: layout, engines per split, unseen speakers, vocabulary, determinism, idempotence,
and refusal to touch foreign data."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from pathlib import Path

import pytest
import soundfile as sf
from data_helpers import SMALL

from asr_plugin.data import MINI_SPLITS, make_mini_librispeech, scan_split
from asr_plugin.data.demo.corpus import ENGINE_WEIGHTS, plan_corpus
from asr_plugin.data.demo.grammar import vocabulary
from asr_plugin.data.demo.voices import ENGINES, PLAYED_AT_HZ, VARIANTS


def _digest(root):
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _timbre(speaker) -> str:
    """What makes a voice: the espeak-ng variant, or the rate Piper's output is played at."""
    voice = speaker.voice
    return f"espeak:{voice.voice.split('+')[1]}" if speaker.engine == "espeak" else f"piper:{voice.played_at_hz}"


def test_layout_is_librispeech(mini_root):
    assert MINI_SPLITS == ("train", "dev", "test-espeak", "test-piper")
    counts = {
        "train": SMALL["n_train"],
        "dev": SMALL["n_dev"],
        "test-espeak": SMALL["n_test"],
        "test-piper": SMALL["n_test"],
    }
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


def test_every_engine_speaks_in_train_and_dev_and_has_its_own_test_split():
    plan = plan_corpus(2700, 210, 150, seed=0)
    engines = {split: Counter(utt.speaker.engine for utt in utts) for split, utts in plan.items()}
    total = sum(ENGINE_WEIGHTS.values())
    for split, count in (("train", 2700), ("dev", 210)):
        assert engines[split] == {engine: count * ENGINE_WEIGHTS[engine] // total for engine in ENGINES}
    assert engines["test-espeak"] == {"espeak": 150} and engines["test-piper"] == {"piper": 150}


def test_leaving_an_engine_out_of_training_keeps_the_test_splits():
    full = plan_corpus(60, 12, 10, seed=3)
    without_piper = plan_corpus(60, 12, 10, seed=3, train_engines=["espeak"])
    assert {utt.speaker.engine for split in ("train", "dev") for utt in without_piper[split]} == {"espeak"}
    for split in ("test-espeak", "test-piper"):
        assert without_piper[split] == full[split]
    for bad in ([], ["espeak", "espeak"], ["festival"]):
        with pytest.raises(ValueError, match="train_engines"):
            plan_corpus(60, 12, 10, seed=3, train_engines=bad)


def test_splits_have_disjoint_sentences_and_unseen_speakers():
    plan = plan_corpus(2700, 210, 150, seed=0)
    sentences = {split: {utt.text for utt in utts} for split, utts in plan.items()}
    assert [len(sentences[s]) for s in MINI_SPLITS] == [2700, 210, 150, 150]
    for index, split in enumerate(MINI_SPLITS):
        for other in MINI_SPLITS[index + 1 :]:
            assert not sentences[split] & sentences[other], (split, other)
    timbres = {split: {_timbre(utt.speaker) for utt in utts} for split, utts in plan.items()}
    assert len(timbres["train"]) == len(VARIANTS["train"]) + len(PLAYED_AT_HZ["train"])  # every train voice speaks
    assert len(timbres["dev"]) == len(VARIANTS["dev"]) + len(PLAYED_AT_HZ["dev"])
    assert len(timbres["test-espeak"]) == len(VARIANTS["test"])
    assert len(timbres["test-piper"]) == len(PLAYED_AT_HZ["test"])
    heard = timbres["train"]
    for split in ("dev", "test-espeak", "test-piper"):
        assert not heard & timbres[split], split
    assert not timbres["dev"] & (timbres["test-espeak"] | timbres["test-piper"])
    accents = {
        split: {utt.speaker.voice.voice.split("+")[0] for utt in utts if utt.speaker.engine == "espeak"}
        for split, utts in plan.items()
    }
    assert accents["test-espeak"] <= accents["train"]  # new voices, accents that training has heard
    rates = [
        utt.speaker.voice.request(utt.text, utt.tempo)[2] for utt in plan["train"] if utt.speaker.engine == "espeak"
    ]
    assert max(rates) - min(rates) > 50  # speakers and utterances differ in speaking rate
    scales = [
        utt.speaker.voice.request(utt.text, utt.tempo).length_scale
        for utt in plan["train"]
        if utt.speaker.engine == "piper"
    ]
    assert max(scales) / min(scales) > 1.3


def test_vocabulary_is_large_and_covers_every_test_word():
    plan = plan_corpus(2700, 210, 150, seed=0)
    words = {split: {w for utt in utts for w in utt.text.split()} for split, utts in plan.items()}
    assert len(vocabulary()) >= 300 and words["train"] <= set(vocabulary())
    assert len(words["train"]) >= 300
    assert words["test-espeak"] | words["test-piper"] <= words["train"]  # no test word training never spelled
    assert plan_corpus(30, 5, 5, seed=1) != plan_corpus(30, 5, 5, seed=2)


def test_deterministic_and_idempotent(mini_root, tmp_path):
    again = make_mini_librispeech(tmp_path / "again", **SMALL, workers=1)
    assert _digest(again) == _digest(mini_root)  # same seed -> byte-identical corpus, whatever the workers
    mtimes = {p: p.stat().st_mtime_ns for p in again.rglob("*") if p.is_file()}
    make_mini_librispeech(again, **SMALL)
    assert {p: p.stat().st_mtime_ns for p in again.rglob("*") if p.is_file()} == mtimes


def test_missing_file_is_regenerated_identically(mini_root, tmp_path):
    root = Path(shutil.copytree(mini_root, tmp_path / "c"))
    victims = [next((root / split).rglob("*.flac")) for split in ("train", "test-piper")]
    originals = [victim.read_bytes() for victim in victims]
    for victim in victims:
        victim.unlink()
    make_mini_librispeech(root, **SMALL)
    assert [victim.read_bytes() for victim in victims] == originals


def test_refuses_foreign_or_different_roots(tmp_path, mini_root):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        make_mini_librispeech(foreign, n_train=2, n_dev=1, n_test=1)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    with pytest.raises(ValueError, match="made with"):
        make_mini_librispeech(mini_root, n_train=25, n_dev=8, n_test=8)
    with pytest.raises(ValueError, match="made with"):
        make_mini_librispeech(mini_root, **SMALL, train_engines=["espeak"])
    with pytest.raises(ValueError, match="n_dev must be >= 1"):
        make_mini_librispeech(tmp_path / "x", n_train=2, n_dev=0, n_test=1)
