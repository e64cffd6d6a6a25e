"""`experiment=first_run` (README's first command): the whole pipeline on a small corpus of its own, with the
sizes docs/training.md gives, composed with Hydra's compose API (nothing is synthesised or trained here)."""

from __future__ import annotations

import re

from train_configs import REPO_ROOT, compose_train

from asr_plugin.training.config_check import check_config


def test_the_first_run_is_the_demo_on_a_small_corpus_of_its_own(tmp_path):
    demo, first = compose_train(tmp_path=tmp_path), compose_train(["experiment=first_run"], tmp_path=tmp_path)
    check_config(first)
    corpus = first.data.mini_corpus
    assert (corpus.n_train, corpus.n_dev, corpus.n_test) == (400, 40, 40)
    assert list(corpus.train_engines) == list(demo.data.mini_corpus.train_engines)  # both engines, as the demo
    assert first.data.root != demo.data.root and first.data.work_dir != demo.data.work_dir  # the demo's is kept
    assert first.model == demo.model and first.test and list(first.data.test_splits) == list(demo.data.test_splits)
    assert first.trainer.max_epochs < demo.trainer.max_epochs
    assert first.optim.scheduler.warmup_steps < demo.optim.scheduler.warmup_steps


def test_docs_give_the_first_runs_sizes(tmp_path):
    cfg = compose_train(["experiment=first_run"], tmp_path=tmp_path)
    corpus = cfg.data.mini_corpus
    text = " ".join((REPO_ROOT / "docs" / "training.md").read_text(encoding="utf-8").split())
    section = re.search(r"### The first run(.*?)(?=###|$)", text)
    assert section, "docs/training.md has no '### The first run' section"
    for phrase in (
        f"{corpus.n_train} training utterances",
        f"{corpus.n_dev} dev utterances",
        f"{corpus.n_test} in each engine's test split",
        f"{cfg.trainer.max_epochs} epochs",
        f"{cfg.optim.scheduler.warmup_steps} warmup steps",
    ):
        assert phrase in section.group(1), f"docs/training.md's first run does not say {phrase!r}"
