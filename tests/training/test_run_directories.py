"""Run directories are unique even for runs started in the same second, and two concurrent runs keep their
own configs and results."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from train_configs import JOB_VARIABLES, REPO_ROOT, TINY_RUN, job_free_env

from asr_plugin.training.distributed import reserve_run_dir, run_id

TRAIN = str(REPO_ROOT / "recipes" / "librispeech" / "train.py")


def _reserve_many(parent: str, name: str, count: int, queue) -> None:
    queue.put([reserve_run_dir(parent, name) for _ in range(count)])


@pytest.mark.slow  # two processes
def test_two_processes_reserving_the_same_second_get_distinct_directories(tmp_path):
    """The worst case of two runs started together: both ask for the same name at once, many times."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [
        context.Process(target=_reserve_many, args=(str(tmp_path), "2026-12-01_10-00-00", 20, queue)) for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    names = queue.get(timeout=120) + queue.get(timeout=120)
    for worker in workers:
        worker.join(timeout=60)
    assert len(set(names)) == 40 and "2026-12-01_10-00-00" in names
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


def test_a_single_process_run_id_reserves_its_directory(tmp_path, monkeypatch):
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    first, second = run_id(tmp_path), run_id(tmp_path)
    assert first != second and (tmp_path / first).is_dir() and (tmp_path / second).is_dir()
    monkeypatch.setenv("ASR_RUN_ID", "shared")  # a job's id names one directory for all its processes
    assert run_id(tmp_path) == run_id(tmp_path) == "shared"


@pytest.mark.parametrize("variables", [{"TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "4"}, {"NODE_RANK": "1"}])
def test_processes_of_one_job_without_a_shared_id_are_refused(tmp_path, monkeypatch, variables):
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match="set ASR_RUN_ID"):
        run_id(tmp_path)


@pytest.mark.slow
def test_two_runs_started_together_keep_their_own_configs_and_results(data_dir, tmp_path):
    env = job_free_env()
    runs = {}
    for seed in (1, 2):
        command = [
            sys.executable,
            TRAIN,
            *TINY_RUN,
            "trainer.max_steps=2",
            f"seed={seed}",
            "test=true",
            "trainer.limit_test_batches=1",
            "trainer.limit_val_batches=0",
            f"paths.data_dir={data_dir}",
            f"paths.log_dir={tmp_path}/logs",
        ]
        runs[seed] = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    outputs = {seed: process.communicate(timeout=600) for seed, process in runs.items()}
    for seed, process in runs.items():
        assert process.returncode == 0, outputs[seed][1][-3000:]
    directories = {}
    for seed, (out, _) in outputs.items():
        directory = Path(
            next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("run directory:"))
        )
        directories[seed] = directory
        assert yaml.safe_load((directory / ".hydra" / "config.yaml").read_text())["seed"] == seed
        assert f"seed={seed}" in (directory / ".hydra" / "overrides.yaml").read_text()
        assert (directory / "checkpoints" / "last.ckpt").is_file() and (directory / "csv" / "metrics.csv").is_file()
        assert "(greedy, last weights):" in out  # no validation ran, so no best checkpoint: the summary says so
    assert directories[1] != directories[2] and directories[1].parent == directories[2].parent
