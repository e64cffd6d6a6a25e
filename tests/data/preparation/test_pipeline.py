"""The preparation pipeline: one layout deriving every path, nothing written under the corpus, steps reused,
what is missing and the command that makes it."""

from __future__ import annotations

import stat

import pytest
from data_helpers import tree_listing, write_small_librispeech

from asr_plugin.data import (
    CorpusLayout,
    CorpusPlan,
    LibriSpeechSource,
    prepare_corpus,
    read_manifest,
    tokenizer_file_name,
)
from asr_plugin.data.preparation import pipeline
from asr_plugin.frontend.logmel import FeatureStats
from asr_plugin.text import Tokenizer

SPLITS = dict(train_splits=("train-clean-100",), valid_splits=("dev-clean",), test_splits=("dev-clean",))


def _plan(corpus_root, work_dir, **kwargs) -> CorpusPlan:
    layout = CorpusLayout(corpus_root, work_dir)
    defaults = dict(
        tokenizer_path=layout.tokenizer("bpe", 30),
        vocab_size=30,
        stats_path=layout.stats,
        stats_features={"num_mel_bins": 40},
    )
    return CorpusPlan(layout, LibriSpeechSource(corpus_root, **SPLITS), **{**defaults, **kwargs})


def _read_only(root) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)


def test_layout_derives_every_path_once(tmp_path):
    layout = CorpusLayout(tmp_path / "LibriSpeech", tmp_path / "work")
    assert layout.manifest("dev-clean") == tmp_path / "work" / "dev-clean.jsonl"
    assert layout.skip_list("dev-clean") == tmp_path / "work" / "dev-clean.skipped.tsv"
    assert layout.tokenizer("unigram", 256) == tmp_path / "work" / "tokenizer_unigram256.model"
    assert tokenizer_file_name("bpe", 500) == "tokenizer_bpe500.model"
    assert layout.stats == tmp_path / "work" / "feature_stats.json"
    for inside in (tmp_path / "LibriSpeech", tmp_path / "LibriSpeech" / "manifests"):
        with pytest.raises(ValueError, match="inside the corpus directory"):
            CorpusLayout(tmp_path / "LibriSpeech", inside)


def test_prepare_corpus_writes_only_into_the_work_dir(tmp_path, capsys):
    # Tests run as root, which ignores file permissions: the corpus is made read-only and, as that alone
    # proves nothing for root, its listing (names, sizes, mtimes of files and directories) is compared.
    root = write_small_librispeech(tmp_path / "LibriSpeech")
    _read_only(root)
    before = tree_listing(root)
    plan = _plan(root, tmp_path / "work")
    assert plan.missing() == [
        tmp_path / "work" / name
        for name in ("train-clean-100.jsonl", "dev-clean.jsonl", "tokenizer_bpe30.model", "feature_stats.json")
    ]
    written = prepare_corpus(plan, progress=False)
    assert tree_listing(root) == before
    assert sorted(written) == sorted(plan.outputs()) and plan.missing() == []
    # .prepare.lock: asr_plugin.data.preparation.work_lock
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == [
        ".prepare.lock",
        "dev-clean.jsonl",
        "dev-clean.origin.json",
        "feature_stats.json",
        "tokenizer_bpe30.model",
        "tokenizer_bpe30.vocab",
        "train-clean-100.jsonl",
        "train-clean-100.origin.json",
    ]
    entries = read_manifest(plan.layout.manifest("train-clean-100"))
    assert len(entries) == 12 and entries[0].text == "THE CAFÉ SEES A DOG"  # as written: the tokenizer normalises
    assert Tokenizer(plan.tokenizer_path).vocab_size == 30
    assert FeatureStats.load(plan.stats_path).mean.shape == (40,)
    # a second run reuses everything and writes nothing
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "work").iterdir()}
    assert prepare_corpus(plan, progress=False) == []
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "work").iterdir()} == mtimes
    assert "reusing" in capsys.readouterr().out


def test_steps_run_alone_and_say_what_they_need(tmp_path, capsys):
    root = write_small_librispeech(tmp_path / "LibriSpeech")
    plan = _plan(root, tmp_path / "work")
    with pytest.raises(
        FileNotFoundError, match=r"(?s)train-clean-100.jsonl.*scripts/prepare_data.py .*--steps manifests"
    ):
        prepare_corpus(plan, ["tokenizer"], progress=False)
    assert prepare_corpus(plan, ["manifests"], progress=False) == [plan.layout.manifest(s) for s in plan.splits]
    assert plan.missing(["tokenizer", "stats"]) == [plan.tokenizer_path, plan.stats_path]
    assert prepare_corpus(plan, ["stats"], progress=False) == [plan.stats_path]
    with pytest.raises(ValueError, match=r"unknown preparation step\(s\) \['tokeniser'\]"):
        prepare_corpus(plan, ["tokeniser"])
    # a configuration that brings its tokenizer and a front end without statistics has neither step
    own = _plan(root, tmp_path / "work", tokenizer_path=None, stats_path=None)
    assert own.outputs() == [plan.layout.manifest(s) for s in plan.splits]
    assert prepare_corpus(own, ["tokenizer", "stats"], progress=False) == []
    printed = capsys.readouterr().out
    assert "brings its own (data.tokenizer)" in printed and "needs none (data.frontend)" in printed


def test_the_command_names_the_values_that_decide_the_paths(tmp_path):
    plan = _plan(tmp_path / "LibriSpeech", tmp_path / "work")
    assert plan.command() == (
        f"python scripts/prepare_data.py data=librispeech data.root={tmp_path}/LibriSpeech "
        "'data.train_splits=[train-clean-100]' 'data.valid_splits=[dev-clean]' "
        f"'data.test_splits=[dev-clean]' data.work_dir={tmp_path}/work data.vocab_size=30 data.tokenizer_type=bpe "
        "data.frontend=null data.num_mel_bins=40"  # statistics to compute: a log-mel front end, not the default
    )


def test_an_unusable_work_dir_is_named(tmp_path):
    root = write_small_librispeech(tmp_path / "LibriSpeech")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(PermissionError, match=r"a_file/work .*data.work_dir"):
        prepare_corpus(_plan(root, tmp_path / "a_file" / "work"), progress=False)


def test_prepared_data_on_a_read_only_file_system_is_only_read(tmp_path, monkeypatch):
    root = write_small_librispeech(tmp_path / "LibriSpeech")
    plan = _plan(root, tmp_path / "work")
    prepare_corpus(plan, progress=False)
    # root ignores permissions, so the check every write goes through says "not writable" here
    monkeypatch.setattr(pipeline.os, "access", lambda path, mode: False)
    assert prepare_corpus(plan, progress=False) == []
    with pytest.raises(PermissionError, match="is not writable: set data.work_dir"):
        prepare_corpus(plan, overwrite=True, progress=False)
