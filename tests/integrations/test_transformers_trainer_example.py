"""scripts/transformers_trainer_example.py (docs/transformers.md's Trainer example run for real) on the session's
tiny corpus, two steps: transformers' processor gives [blank] + labels as decoder inputs, and with one seed
transformers' loss and the sample-wise one log the same training losses."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers.models.parakeet")
pytest.importorskip("accelerate")  # the Trainer's

from built_once import copy_of  # noqa: E402

from benchmarks.transformers_trainer import run_example  # noqa: E402


@pytest.mark.slow  # two Trainer runs and four dev decodes, end to end
def test_both_losses_take_the_same_steps(tiny_corpus, tmp_path):
    corpus = copy_of(tiny_corpus, tmp_path / "mini")
    own, samplewise = run_example(corpus, ["rnnt"], [0], steps=2, pieces=40)
    assert (own["loss"], samplewise["loss"]) == ("transformers", "samplewise")
    assert len(own["losses"]) == 2 and own["before"] == samplewise["before"]
    assert samplewise["losses"] == pytest.approx(own["losses"], rel=1e-5)
