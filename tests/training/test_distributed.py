"""Before the Trainer exists: the launch rank from launcher variables, data prepared by rank 0 only, one run
directory name per job, and the refusal of the demo's warmup on LibriSpeech."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from train_configs import compose_train

from asr_plugin.training.distributed import launch_rank, prepare_data_once, run_id
from asr_plugin.training.train import check_schedule_fits_corpus

LAUNCH_VARIABLES = ("RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK", "NODE_RANK", "LOCAL_RANK", "ASR_RUN_ID",
                    "SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID")


@pytest.fixture
def clean_env(monkeypatch):
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(("variables", "rank"), [
    ({}, 0),
    ({"RANK": "3", "LOCAL_RANK": "1"}, 3),  # torchrun: the global rank wins
    ({"SLURM_PROCID": "5"}, 5),
    ({"NODE_RANK": "1"}, 1),  # Lightning's launcher, first process of node 1: not rank 0
    ({"NODE_RANK": "0", "LOCAL_RANK": "2"}, 2),
])
def test_launch_rank_reads_the_launchers_variables(clean_env, variables, rank):
    for name, value in variables.items():
        clean_env.setenv(name, value)
    assert launch_rank() == rank


def test_launch_rank_rejects_junk(clean_env):
    clean_env.setenv("RANK", "first")
    with pytest.raises(ValueError, match="RANK='first'"):
        launch_rank()


class _FakeData:
    """Writes `files` on prepare_data(); counts the calls."""

    def __init__(self, files: list[Path]):
        self.files, self.calls = files, 0

    def prepare_data(self) -> None:
        self.calls += 1
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
    data = _FakeData([tmp_path / "feature_stats.json"])
    with pytest.raises(RuntimeError, match=r"(?s)rank 2: .*feature_stats.json.*run.sh --stop-stage 2") as error:
        prepare_data_once(data, rank=2, timeout_s=0.05, poll_s=0.01)
    assert data.calls == 0 and "waited 0 s" in str(error.value)


def test_real_data_module_lists_its_missing_files(tmp_path):
    from asr_plugin.data import TransducerDataModule

    dm = TransducerDataModule(root=str(tmp_path / "c"), manifest_dir=str(tmp_path / "m"), train_splits=["a"],
                              valid_splits=["b"], test_splits=["b", "c"])
    assert [p.name for p in dm.missing_prepared()] == ["a.jsonl", "b.jsonl", "c.jsonl", "tokenizer_bpe500.model",
                                                       "feature_stats.json"]


@pytest.mark.parametrize(("variables", "expected"), [
    ({"ASR_RUN_ID": "mine", "SLURM_JOB_ID": "7"}, "mine"),
    ({"SLURM_JOB_ID": "7"}, "slurm7"),
    ({"SLURM_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "2", "SLURM_STEP_ID": "0"}, "slurm7_2.0"),
    ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "batch"}, "slurm7"),
    ({"TORCHELASTIC_RUN_ID": "abc"}, "torchrunabc"),
])
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
    check_schedule_fits_corpus(compose_train(["data=librispeech", "optim.scheduler.warmup_steps=5000"], tmp_path=tmp_path))
    check_schedule_fits_corpus(compose_train([], tmp_path=tmp_path))  # the demo keeps its warmup
    finetune = ["data=librispeech", "+finetune=from_checkpoint", "finetune.path=/x/last.ckpt"]
    check_schedule_fits_corpus(compose_train(finetune, tmp_path=tmp_path))  # fine-tuning may warm up briefly
