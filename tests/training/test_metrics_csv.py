"""metrics.csv is written as metrics are logged, survives a failed or killed run, and keeps a resumed run's
earlier rows (``asr_plugin.training.csv_logger``)."""

from __future__ import annotations

import csv
import io
import signal
import subprocess
import sys
import time

import pytest
from train_configs import REPO_ROOT, TINY_RUN, job_free_env

from asr_plugin.training import train
from asr_plugin.training.csv_logger import DurableMetricsWriter


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_a_reused_directory_keeps_earlier_rows_and_replaces_the_redone_steps(tmp_path):
    first = DurableMetricsWriter(str(tmp_path))
    for step in range(5):
        first.log_metrics({"train/loss": 10.0 - step}, step)
        first.save()
    resumed = DurableMetricsWriter(str(tmp_path))  # a requeued job resuming from its step-3 checkpoint
    resumed.log_metrics({"train/loss": 6.5, "val/wer": 0.5}, 3)  # a new column: the file is rewritten
    resumed.save()
    rows = _rows((tmp_path / "metrics.csv").read_text())
    assert [(int(r["step"]), float(r["train/loss"])) for r in rows] == [(0, 10.0), (1, 9.0), (2, 8.0), (3, 6.5)]
    assert rows[-1]["val/wer"] == "0.5" and rows[0]["val/wer"] == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv"]  # no temporary file left


@pytest.mark.slow
def test_a_run_stopped_by_non_finite_logits_leaves_its_metrics(tiny_run, tmp_path):
    snapshot = tmp_path / "on-disk-when-it-failed.csv"
    cfg = tiny_run(
        [
            "trainer.max_steps=10",
            "trainer.max_epochs=100",
            "trainer.log_every_n_steps=1",
            "+callbacks.poison._target_=training_synthetic.PoisonAfterSteps",
            "+callbacks.poison.steps=4",
            f"+callbacks.poison.snapshot={snapshot}",
        ]
    )
    with pytest.raises(ValueError, match="not finite"):
        train(cfg)
    # flushed as logged: steps 0-3 were on disk before the failing step began
    assert sorted({int(r["step"]) for r in _rows(snapshot.read_text()) if r.get("train/loss_step")}) == [0, 1, 2, 3]
    final = _rows(open(f"{cfg.paths.output_dir}/csv/metrics.csv").read())
    assert sorted({int(r["step"]) for r in final if r.get("train/loss_step")}) == [0, 1, 2, 3]


@pytest.mark.slow
def test_a_killed_run_leaves_the_metrics_it_logged(data_dir, tmp_path):
    env = job_free_env()
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        str(REPO_ROOT / "recipes" / "librispeech" / "train.py"),
        *TINY_RUN,
        "trainer.max_steps=1000",
        "trainer.max_epochs=1000",
        f"paths.data_dir={data_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    metrics = run_dir / "csv" / "metrics.csv"
    try:
        deadline = time.monotonic() + 300
        while not (metrics.exists() and len(metrics.read_text().splitlines()) > 3):
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()[-3000:]
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)  # as SLURM, the OOM killer or a dead DDP peer's launcher would
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    rows = _rows(metrics.read_text())
    assert len(rows) >= 3 and all(r["step"] for r in rows)
