"""scripts/transformers_trainer_example.py (docs/transformers.md's Trainer example run for real) on the session's
tiny corpus, two steps of each lattice: transformers' processor gives [blank] + labels as decoder inputs, the dev
WER is measured at step 0 and after every step (the model read back by the format seam), and with one seed
transformers' loss and the sample-wise one log the same training losses."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers.models.parakeet")
pytest.importorskip("accelerate")  # the Trainer's

from built_once import copy_of  # noqa: E402

from benchmarks.transformers_trainer import run_example  # noqa: E402


@pytest.mark.slow  # four Trainer runs and twelve dev decodes, end to end
def test_both_losses_take_the_same_steps(tiny_corpus, tmp_path):
    corpus = copy_of(tiny_corpus, tmp_path / "mini")
    settings = dict(steps=2, learning_rate=2e-3, eval_steps=1)
    results = run_example(corpus, ["rnnt", "tdt"], [0], settings, pieces=40)
    assert [(r["kind"], r["loss"]) for r in results] == [
        ("rnnt", "transformers"),
        ("rnnt", "samplewise"),
        ("tdt", "transformers"),
        ("tdt", "samplewise"),
    ]
    for own, samplewise in (results[:2], results[2:]):
        assert [step for step, _ in own["curve"]] == [0, 1, 2] == [step for step, _ in samplewise["curve"]]
        assert own["curve"][0] == samplewise["curve"][0]  # the same initial model
        assert len(own["losses"]) == 2
        assert samplewise["losses"] == pytest.approx(own["losses"], rel=1e-5)
