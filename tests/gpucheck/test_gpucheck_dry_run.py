"""The GPU check's dry run end to end on the CPU, through scripts/gpu_check.sh: every stage of the GPU plan at
CPU sizes (build, the pytest stage, the benchmark cells with and without TF32, the training smoke, both
profiles) and a stage that sleeps past its limit; each stage's files and table land in the output folder's
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
    for stage in status:
        assert f"{stage}/log.txt" in names
    for stage, pattern in (
        ("paper-bf16", "loss_cpu_quick_bf16-autocast_"),
        ("paper-fp32-tf32", "loss_cpu_quick_fp32_"),
        ("triton-paper-bf16", "loss_cpu_quick_bf16-autocast_"),
        ("side-by-side", "loss_cpu_quick_fp32_"),
        ("paper-tdt", "loss_cpu_quick-tdt_bf16-autocast_"),
        ("profile-fp32", "profile_cpu_fp32_"),
        ("cuda-tests", "junit.xml"),
    ):
        assert any(name.startswith(f"{stage}/{pattern}") for name in names), (stage, names)
        assert f"{stage}/table.txt" in names
    # every table rendered from its stage's files (a renamed key in a script's JSON shows up here)
    for stage in summary["stages"]:
        assert not stage["table"].startswith("(no table"), (stage["name"], stage["table"])
    assert [run["status"] for run in smoke["runs"]] == ["ok", "ok"]
    text = (tmp_path / "out" / "summary.txt").read_text()
    assert "timed_out (as expected)" in text and "12 passed, 0 failed, 1 timed out, 0 skipped" in text
    assert "== train-smoke" in text and "== paper-fp32-tf32" in text
