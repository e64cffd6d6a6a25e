"""The training smoke (scripts/gpucheck/smoke.py): the bounded largest-batch search against a known
threshold, out-of-memory handling, its options, and its CPU dry run end to end (scripts/gpu_smoke_train.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpucheck.smoke import ModelSpec, fits_in_memory, largest_fitting
from gpucheck.smoke_results import render_results

REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.slow
def test_dry_run_trains_both_modes_and_searches(tmp_path):
    """scripts/gpu_smoke_train.sh --dry-run: the micro model on 3-4 s utterances, batches of 4, on the CPU."""
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    command = [
        "bash",
        str(REPO / "scripts" / "gpu_smoke_train.sh"),
        "--dry-run",
        "--out",
        str(tmp_path / "out"),
        "--work-dir",
        str(tmp_path / "work"),
    ]
    process = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "smoke.json").read_text())
    assert [(run["mode"], run["status"]) for run in results["runs"]] == [("samplewise", "ok"), ("batched", "ok")]
    for run in results["runs"]:
        assert run["loss_finite"] and run["loss_first"] > 0
        assert run["utterances_per_step"] == 4  # one bucket, 4 * 4 s padded: exactly the batch
        # 3-4 s utterances: audio-seconds per utterance from the frame counts and the 10 ms hop
        assert 3.0 <= run["audio_s_per_s"] / run["utterances_per_s"] <= 4.01
        assert run["peak_mib"] is None  # no CUDA: no memory metric
    assert [search["mode"] for search in results["searches"]] == ["samplewise", "batched"]
    for search in results["searches"]:
        assert search["trials"] == [[2, "fits"], [4, "fits"], [8, "fits"]] and search["cap"] == 12
    assert "largest batch that trains" in process.stdout
