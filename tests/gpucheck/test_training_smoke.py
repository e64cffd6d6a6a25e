"""The training smoke (scripts/gpucheck/smoke.py): the bounded largest-batch search against a known
threshold, out-of-memory handling, its options (its CPU dry run end to end, scripts/gpu_smoke_train.sh --dry-run, is
checked inside the GPU check's dry run: tests/gpucheck/test_gpucheck_dry_run.py)."""

from __future__ import annotations

import pytest
import torch

from gpucheck.smoke import ModelSpec, fits_in_memory, largest_fitting
from gpucheck.smoke_results import render_results


@pytest.mark.parametrize("threshold", [1, 7, 8, 37, 100, 255])
def test_search_brackets_the_largest_batch_that_fits(threshold):
    result = largest_fitting(lambda batch: batch <= threshold, start=8, cap=256, max_trials=20)
    fit, oom = result["largest_fit"], result["smallest_oom"]
    assert fit <= threshold < oom <= 256
    assert oom - fit <= max(1, fit // 8)
    assert all((outcome == "fits") == (batch <= threshold) for batch, outcome in result["trials"])
    assert len(result["trials"]) <= 12 and not result["stopped"]


def test_search_reports_a_cap_that_fits_and_a_batch_of_one_that_does_not():
    capped = largest_fitting(lambda batch: True, start=8, cap=100, max_trials=20)
    assert (capped["largest_fit"], capped["smallest_oom"]) == (100, None)
    assert [batch for batch, _ in capped["trials"]] == [8, 16, 32, 64, 100]
    nothing = largest_fitting(lambda batch: False, start=8, cap=100, max_trials=20)
    assert (nothing["largest_fit"], nothing["smallest_oom"]) == (None, 1)


def test_search_stops_at_its_try_and_time_limits():
    tries = largest_fitting(lambda batch: batch <= 1000, start=2, cap=4096, max_trials=3)
    assert len(tries["trials"]) == 3 and tries["largest_fit"] == 8 and "3 tries" in tries["stopped"]
    timed = largest_fitting(lambda batch: True, start=2, cap=64, max_trials=9, out_of_time=lambda: True)
    assert timed["trials"] == [] and timed["largest_fit"] is None and "no time" in timed["stopped"]
    with pytest.raises(ValueError, match="max_trials"):
        largest_fitting(lambda batch: True, start=2, cap=64, max_trials=0)


def test_out_of_memory_means_does_not_fit_and_other_errors_propagate():
    def oom():
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def broken():
        raise RuntimeError("shape mismatch")

    assert fits_in_memory(lambda: None) is True
    assert fits_in_memory(oom) is False
    with pytest.raises(RuntimeError, match="shape mismatch"):
        fits_in_memory(broken)


def test_model_specs_name_their_preset_and_vocabulary():
    assert ModelSpec.parse("parakeet_rnnt_1b:1025") == ModelSpec("parakeet_rnnt_1b", 1025)
    with pytest.raises(ValueError, match="PRESET:VOCAB"):
        ModelSpec.parse("medium")
    with pytest.raises(ValueError, match="conf/model/huge.yaml"):
        ModelSpec.parse("huge:500")


def test_table_shows_skipped_runs_and_searches_without_an_oom():
    run = dict(
        model="medium",
        vocab_size=500,
        mode="batched",
        batch=32,
        steps=6,
        status="oom",
        seconds=3.0,
        utterances_per_step=None,
        utterances_per_s=None,
        audio_s_per_s=None,
        peak_mib=None,
        loss_first=None,
        loss_last=None,
        loss_finite=None,
        error="CUDA out of memory",
    )
    search = dict(
        model="medium",
        vocab_size=500,
        mode="samplewise",
        start=8,
        cap=64,
        largest_fit=64,
        smallest_oom=None,
        trials=[[8, "fits"], [64, "fits"]],
        stopped="",
    )
    table = render_results(dict(meta={}, runs=[run], searches=[search]))
    assert "oom" in table and "CUDA out of memory" in table
    assert table.splitlines()[-1].split()[:6] == ["medium", "samplewise", "64", "none", "64", "8:ok"]
