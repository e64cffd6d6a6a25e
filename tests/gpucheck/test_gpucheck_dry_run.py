"""The GPU check's dry run end to end on the CPU, through scripts/gpu_check.sh: every stage of the GPU plan at
CPU sizes (build, the pytest stage, the benchmark cells with and without TF32, the training smoke with its
batch searches, both profiles) and a stage that sleeps past its limit; each stage's files and table land in the output folder's
archive, and the folder holds only what comes back from the device (summary.json, summary.txt, results.tar.gz)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_dry_run_runs_every_stage_and_keeps_its_results(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    env.pop("OUT", None)
    command = [
        "bash",
        str(REPO / "scripts" / "gpu_check.sh"),
        "--dry-run",
        "--out",
        str(tmp_path / "out"),
        "--work-dir",
        str(tmp_path / "work"),
    ]
    process = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1500)
    assert process.returncode == 0, process.stdout[-4000:] + process.stderr[-4000:]

    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    status = {stage["name"]: stage["status"] for stage in summary["stages"]}
    assert status == {
        "triton-tests": "passed",
        "triton-paper-bf16": "passed",
        "side-by-side": "passed",
        "build": "passed",
        "cuda-tests": "passed",
        "paper-bf16": "passed",
        "paper-fp32": "passed",
        "paper-fp32-tf32": "passed",
        "paper-tdt": "passed",
        "train-smoke": "passed",
        "profile-bf16": "passed",
        "profile-fp32": "passed",
        "limit-check": "timed_out",
    }
    limit_check = summary["stages"][-1]
    assert limit_check["seconds"] < limit_check["limit_s"] + 6  # cut at 3 s (+ the SIGTERM grace)
    assert summary["meta"]["mode"] == "dry run (CPU sizes)"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.tar.gz", "summary.json", "summary.txt"]

    with tarfile.open(tmp_path / "out" / "results.tar.gz") as archive:
        names = archive.getnames()
        smoke = json.load(archive.extractfile("train-smoke/smoke.json"))
        smoke_log = archive.extractfile("train-smoke/log.txt").read().decode()
    for stage in status:
        assert f"{stage}/log.txt" in names
    for stage, pattern in (
        ("paper-bf16", "loss_cpu_dry_bf16-autocast_"),
        ("paper-fp32-tf32", "loss_cpu_dry_fp32_"),
        ("triton-paper-bf16", "loss_cpu_dry_bf16-autocast_"),
        ("side-by-side", "loss_cpu_dry_fp32_"),
        ("paper-tdt", "loss_cpu_dry-tdt_bf16-autocast_"),
        ("profile-fp32", "profile_cpu_fp32_"),
        ("cuda-tests", "junit.xml"),
    ):
        assert any(name.startswith(f"{stage}/{pattern}") for name in names), (stage, names)
        assert f"{stage}/table.txt" in names
    # every table rendered from its stage's files (a renamed key in a script's JSON shows up here)
    for stage in summary["stages"]:
        assert not stage["table"].startswith("(no table"), (stage["name"], stage["table"])
    # the training smoke's own dry run (scripts/gpu_smoke_train.sh --dry-run, the stage's command): the micro model
    # on 3-4 s utterances, batches of 4, both loss modes and their bounded batch searches
    assert [(run["mode"], run["status"]) for run in smoke["runs"]] == [("samplewise", "ok"), ("batched", "ok")]
    for run in smoke["runs"]:
        assert run["loss_finite"] and run["loss_first"] > 0
        assert run["utterances_per_step"] == 4  # one bucket, 4 * 4 s padded: exactly the batch
        # 3-4 s utterances: audio-seconds per utterance from the frame counts and the 10 ms hop
        assert 3.0 <= run["audio_s_per_s"] / run["utterances_per_s"] <= 4.01
        assert run["peak_mib"] is None  # no CUDA: no memory metric
    assert [search["mode"] for search in smoke["searches"]] == ["samplewise", "batched"]
    for search in smoke["searches"]:
        assert search["trials"] == [[2, "fits"], [4, "fits"], [8, "fits"]] and search["cap"] == 12
    assert "largest batch that trains" in smoke_log
    text = (tmp_path / "out" / "summary.txt").read_text()
    assert "timed_out (as expected)" in text and "12 passed, 0 failed, 1 timed out, 0 skipped" in text
    assert "== train-smoke" in text and "== paper-fp32-tf32" in text
