"""Before the Trainer exists: the launch rank from launcher variables, data prepared by rank 0 only, one run
directory name per job, and the refusal of the demo's warmup on LibriSpeech."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from train_configs import compose_train

from asr_plugin.training import distributed
from asr_plugin.training.distributed import launch_rank, prepare_data_once, run_id
from asr_plugin.training.schedulers import check_schedule_fits_corpus

LAUNCH_VARIABLES = (
    "RANK",
    "SLURM_PROCID",
    "JSM_NAMESPACE_RANK",
    "NODE_RANK",
    "LOCAL_RANK",
    "ASR_RUN_ID",
    "SLURM_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_STEP_ID",
    "TORCHELASTIC_RUN_ID",
)


@pytest.fixture
def clean_env(monkeypatch):
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("variables", "rank"),
    [
        ({}, 0),
        ({"RANK": "3", "LOCAL_RANK": "1"}, 3),  # torchrun: the global rank wins
        ({"SLURM_PROCID": "5"}, 5),
        ({"NODE_RANK": "1"}, 1),  # Lightning's launcher, first process of node 1: not rank 0
        ({"NODE_RANK": "0", "LOCAL_RANK": "2"}, 2),
    ],
)
def test_launch_rank_reads_the_launchers_variables(clean_env, variables, rank):
    for name, value in variables.items():
        clean_env.setenv(name, value)
    assert launch_rank() == rank


def test_launch_rank_rejects_junk(clean_env):
    clean_env.setenv("RANK", "first")
    with pytest.raises(ValueError, match="RANK='first'"):
        launch_rank()


class _FakeData:
    """Writes `files` on prepare_data() (or raises `error`); counts the calls."""

    def __init__(self, files: list[Path], error: Exception | None = None, timeout_s: float = 30.0):
        self.files, self.error, self.calls = files, error, 0
        self.prepare_timeout_s = timeout_s
        self.preparation_failure = files[0].parent / ".preparation_failed.json"

    def prepare_data(self) -> None:
        self.calls += 1
        if self.error is not None:
            raise self.error
        for path in self.files:
            path.write_text("x")

    def missing_prepared(self) -> list[Path]:
        return [path for path in self.files if not path.exists()]


def test_rank_zero_prepares_and_other_ranks_only_wait(tmp_path):
    files = [tmp_path / "train.jsonl", tmp_path / "tokenizer.model"]
    zero, one = _FakeData(files), _FakeData(files)
    waiter = threading.Thread(target=prepare_data_once, args=(one,), kwargs=dict(rank=1, timeout_s=30, poll_s=0.01))
    waiter.start()
    prepare_data_once(zero, rank=0)
    waiter.join(timeout=30)
    assert not waiter.is_alive() and (zero.calls, one.calls) == (1, 0)


def test_a_rank_that_never_sees_the_data_says_what_is_missing(tmp_path):
    data = _FakeData([tmp_path / "feature_stats.json"], timeout_s=0.05)  # the timeout is the config's value
    with pytest.raises(
        RuntimeError,
        match=r"(?s)rank 2: waited 0 s \(data.prepare_timeout_s=0.05\).*"
        r"feature_stats.json.*run.sh --stop-stage 2",
    ) as error:
        prepare_data_once(data, rank=2, poll_s=0.01)
    assert data.calls == 0 and "data.work_dir" in str(error.value)


class FakeClock:
    """The ``time`` of `prepare_data_once`: sleeping moves the clock on by exactly that long, at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str):
        return getattr(time, name)  # the rest of the module, as it is


def test_waiting_ranks_say_what_they_wait_for(tmp_path, caplog, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(distributed, "time", clock)
    data = _FakeData([tmp_path / "train.jsonl", tmp_path / "feature_stats.json"], timeout_s=0.75)
    with caplog.at_level(logging.INFO, logger="asr_plugin.training.distributed"), pytest.raises(RuntimeError):
        prepare_data_once(data, rank=1, poll_s=0.0625, report_s=0.25)  # binary fractions: exact sums
    reports = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert len(reports) == 3 and clock.now == 0.75  # at 0, 0.25 and 0.5 s: every report_s, not every poll
    assert "rank 1: waiting 0 s of 0.75 s for rank 0 to prepare 2 file(s)" in reports[0]
    assert str(tmp_path / "train.jsonl") in reports[0] and str(tmp_path / "feature_stats.json") in reports[0]


def test_rank_zeros_failure_stops_the_waiting_ranks_of_its_job(clean_env, tmp_path):
    clean_env.setenv("ASR_RUN_ID", "job-1")  # srun, torchrun and ASR_RUN_ID give every rank the same run_id()
    files = [tmp_path / "train.jsonl"]
    waiting = _FakeData(files, timeout_s=60)
    errors = []

    def wait():
        try:
            prepare_data_once(waiting, rank=1, poll_s=0.01)
        except RuntimeError as err:
            errors.append(str(err))

    waiter = threading.Thread(target=wait)
    waiter.start()
    with pytest.raises(PermissionError, match="read-only corpus"):
        prepare_data_once(_FakeData(files, error=PermissionError("read-only corpus")), rank=0)
    waiter.join(timeout=10)
    assert not waiter.is_alive() and len(errors) == 1
    assert "rank 1: rank 0 failed to prepare the data (PermissionError: read-only corpus)" in errors[0]


def test_another_jobs_failure_record_is_not_this_jobs(clean_env, tmp_path):
    files = [tmp_path / "train.jsonl"]
    clean_env.setenv("ASR_RUN_ID", "old-job")
    with pytest.raises(ValueError):
        prepare_data_once(_FakeData(files, error=ValueError("bad config")), rank=0)
    assert (tmp_path / ".preparation_failed.json").exists()
    clean_env.setenv("ASR_RUN_ID", "new-job")
    with pytest.raises(RuntimeError, match=r"waited .* still missing"):  # the timeout, not old-job's error
        prepare_data_once(_FakeData(files, timeout_s=0.05), rank=1, poll_s=0.01)
    prepare_data_once(_FakeData(files), rank=0)  # the new job's rank 0 clears the old record
    assert not (tmp_path / ".preparation_failed.json").exists()


def test_real_data_module_lists_its_missing_files(tmp_path):
    from asr_plugin.data import TransducerDataModule

    dm = TransducerDataModule(
        root=str(tmp_path / "c"),
        work_dir=str(tmp_path / "m"),
        train_splits=["a"],
        valid_splits=["b"],
        test_splits=["b", "c"],
        prepare_timeout_s=12,
    )
    assert [p.name for p in dm.missing_prepared()] == [
        "a.jsonl",
        "b.jsonl",
        "c.jsonl",
        "tokenizer_bpe500.model",
        "feature_stats.json",
    ]
    assert dm.prepare_timeout_s == 12.0 and dm.preparation_failure.parent == tmp_path / "m"


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"ASR_RUN_ID": "mine", "SLURM_JOB_ID": "7"}, "mine"),
        ({"SLURM_JOB_ID": "7"}, "slurm7"),
        ({"SLURM_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "2", "SLURM_STEP_ID": "0"}, "slurm7_2.0"),
        ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "batch"}, "slurm7"),
        ({"TORCHELASTIC_RUN_ID": "abc"}, "torchrunabc"),
    ],
)
def test_run_id_is_shared_by_the_processes_of_a_job(clean_env, variables, expected):
    for name, value in variables.items():
        clean_env.setenv(name, value)
    assert run_id() == expected


def test_run_id_of_a_single_process_is_its_start_time(clean_env):
    clean_env.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun without --rdzv-id
    assert len(run_id()) == len("2026-11-30_14-00-00") and run_id()[4] == "-"


def test_librispeech_refuses_the_demo_warmup(tmp_path):
    with pytest.raises(ValueError, match="warmup_steps=200 .*`experiment=librispeech_medium`"):
        check_schedule_fits_corpus(compose_train(["data=librispeech", "model=medium"], tmp_path=tmp_path))
    check_schedule_fits_corpus(compose_train(["experiment=librispeech_medium"], tmp_path=tmp_path))
    check_schedule_fits_corpus(
        compose_train(["data=librispeech", "optim.scheduler.warmup_steps=5000"], tmp_path=tmp_path)
    )
    check_schedule_fits_corpus(compose_train([], tmp_path=tmp_path))  # the demo keeps its warmup
    finetune = ["data=librispeech", "+finetune=from_checkpoint", "finetune.path=/x/last.ckpt"]
    check_schedule_fits_corpus(compose_train(finetune, tmp_path=tmp_path))  # fine-tuning may warm up briefly
