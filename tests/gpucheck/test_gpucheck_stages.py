"""The stage runner (gpucheck.stages): a stage that overruns is cut with everything it started,
the rest still run, prerequisites and the total limit skip what cannot run, and the summary and the results
archive are in the output folder after every stage, also when the runner itself is killed mid-check."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from gpucheck.stages import Stage, run_stages, summary_text

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]


def python(code: str) -> list[str]:
    return [PY, "-c", code]


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a killed one whose parent died may linger as a zombie until reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_stage_arguments_are_checked():
    with pytest.raises(ValueError, match="letters, digits"):
        Stage("bad name", ["true"], 1)
    with pytest.raises(ValueError, match="limit_s must be positive"):
        Stage("ok", ["true"], 0)
    with pytest.raises(ValueError, match="expect must be one of"):
        Stage("ok", ["true"], 1, expect="done")


@pytest.mark.slow
def test_an_overrunning_stage_is_cut_with_its_children_and_the_rest_still_run(tmp_path):
    writes = "import pathlib, sys; pathlib.Path(sys.argv[1], 'result.json').write_text('{\"x\": 1}'); print('wrote')"
    # the sleeper starts a grandchild (same process group) and reports its pid; both must be gone after the cut
    sleeper = (
        "import subprocess, time; child = subprocess.Popen(['sleep', '60']); "
        "print('pid', child.pid, 'started', flush=True); time.sleep(60)"
    )
    stages = [
        Stage("writes", [PY, "-c", writes, "{dir}"], limit_s=60, table=lambda d: (d / "result.json").read_text()),
        Stage("sleeper", python(sleeper), limit_s=2),
        Stage("fails", python("import sys; print('bad'); sys.exit(3)"), limit_s=60),
        Stage("needs-fails", python("print('never')"), limit_s=60, needs=("fails",)),
        Stage("after", python("print('still ran')"), limit_s=60),
    ]
    start = time.monotonic()
    results = run_stages(stages, tmp_path / "work", tmp_path / "out", total_limit_s=300, cwd=REPO, echo=io.BytesIO())
    assert time.monotonic() - start < 30
    status = {r.name: r.status for r in results}
    assert status == {
        "writes": "passed",
        "sleeper": "timed_out",
        "fails": "failed",
        "needs-fails": "skipped",
        "after": "passed",
    }
    sleeper_result = results[1]
    assert 2 <= sleeper_result.seconds < 2 + 5 + 3 and "cut at its limit" in sleeper_result.reason
    log = (tmp_path / "work" / "sleeper" / "log.txt").read_text()
    child = int(log.rsplit("pid ", 1)[1].split()[0])
    time.sleep(0.2)
    assert not running(child)
    assert results[2].returncode == 3 and "exit status 3" in results[2].reason
    assert "needs fails" in results[3].reason

    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [s["status"] for s in summary["stages"]] == list(status.values())
    assert summary["stages"][0]["table"] == '{"x": 1}'
    text = (tmp_path / "out" / "summary.txt").read_text()
    assert "4 of 5 stages ran, 2 passed, 1 failed, 1 timed out, 1 skipped" in text
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as archive:
        names = set(archive.getnames())
    assert {"writes/log.txt", "writes/result.json", "writes/table.txt", "sleeper/log.txt", "fails/log.txt"} <= names
    assert not any(name.endswith(".partial") for name in names)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.tar.gz", "summary.json", "summary.txt"]


@pytest.mark.slow
def test_the_total_limit_cuts_and_skips_what_does_not_fit(tmp_path):
    stages = [
        Stage("first", python("import time; time.sleep(1.5)"), limit_s=60),
        Stage("second", python("import time; time.sleep(60)"), limit_s=60),  # gets what is left of the 4 s
        Stage("third", python("print('no time')"), limit_s=60),
    ]
    results = run_stages(
        stages, tmp_path / "work", tmp_path / "out", total_limit_s=4, cwd=REPO, min_stage_s=1, echo=io.BytesIO()
    )
    assert [r.status for r in results] == ["passed", "timed_out", "skipped"]
    assert results[1].limit_s < 3 and "the total's remainder" in results[1].reason
    assert "no time left" in results[2].reason


@pytest.mark.slow
def test_results_of_finished_stages_survive_a_killed_runner(tmp_path):
    """The device kills a command at its limit: what finished before must already be in the output folder."""
    script = f"""
import sys
from pathlib import Path
from gpucheck.stages import Stage, run_stages
stages = [Stage("quick", [sys.executable, "-c", "print('done')"], limit_s=60),
          Stage("endless", [sys.executable, "-c", "import time; time.sleep(600)"], limit_s=600)]
run_stages(stages, Path({str(tmp_path / "work")!r}), Path({str(tmp_path / "out")!r}), total_limit_s=900, cwd=Path({str(REPO)!r}))
"""
    runner = subprocess.Popen(
        [PY, "-c", script],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "scripts")])),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    summary = tmp_path / "out" / "summary.json"
    try:
        deadline = time.monotonic() + 60
        while not summary.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # the second stage is running now
    finally:
        os.killpg(runner.pid, signal.SIGKILL)  # the runner and its stage, as a device timeout would
        runner.wait()
    stages = json.loads(summary.read_text())["stages"]
    assert [(s["name"], s["status"]) for s in stages] == [("quick", "passed")]
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as archive:
        assert archive.extractfile("quick/log.txt").read().decode().endswith("done\n")


def test_summary_text_marks_expected_cuts():
    from gpucheck.stages import StageResult

    results = [
        StageResult("a", "timed_out", 3.0, 3, 3, "timed_out", reason="cut"),
        StageResult("b", "passed", 1.0, 10, None, "passed", table="x | y"),
    ]
    text = summary_text(results, ["date: today"])
    assert text.startswith("date: today\n")
    assert "timed_out (as expected)" in text and "== b\nx | y" in text
