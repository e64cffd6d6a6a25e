"""Our import of NeMo-built (Fast)Conformer-RNNT checkpoints against NeMo itself (skipped without NeMo).

Run in an environment with ``pip install -e '.[nemo]'``. The checkpoints are NeMo's example configs shrunk,
with random weights (`benchmarks.nemo_examples`); `benchmarks.nemo_compare` runs NeMo's
model and ours on the same batch and measures the differences asserted here (scripts/compare_nemo_import.py
prints them).
"""

from __future__ import annotations

import pytest

pytest.importorskip("nemo.collections.asr")
pytestmark = pytest.mark.nemo

from benchmarks.nemo_compare import compare_file  # noqa: E402
from benchmarks.nemo_examples import ARCHITECTURES, save_example_model  # noqa: E402


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def differences(request, tmp_path_factory) -> dict:
    return compare_file(save_example_model(request.param, tmp_path_factory.mktemp("nemo")))


def test_frontend_matches_nemo_preprocessor(differences):
    assert differences["feature_lengths_equal"] and differences["features"] <= 2e-4


def test_encoder_output_matches_within_1e_4(differences):
    assert differences["encoder_lengths_equal"]
    assert differences["encoder"] <= 1e-4  # on NeMo's features
    assert differences["encoder_end_to_end"] <= 1e-3  # on ours: the front end's float32 noise included


def test_joint_log_probs_match(differences):
    assert differences["joint_log_probs"] <= 1e-4


@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_loss_matches_nemo_loss_per_sample(differences, mode):
    assert differences[f"loss_{mode}"] == pytest.approx(differences["loss_nemo"], rel=1e-4)


def test_greedy_transcripts_match(differences):
    assert differences["greedy_tokens"] > 0, "the comparison must decode some tokens"
    assert differences["greedy_tokens_equal"] and differences["greedy_text_equal"]
