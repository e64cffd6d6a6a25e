"""SLURM without a cluster: the requeue signal is the one Lightning listens for, a training process that gets it
writes a checkpoint at the next step boundary and the requeued job resumes from it exactly; under DDP the ranks
agree on the step (`asr_plugin.training.slurm_requeue`); devices and nodes come from SLURM's variables."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from omegaconf import OmegaConf
from train_configs import CONF_DIR, REPO_ROOT, TINY_RUN, StubTrainer, job_free_env, train_steps

from asr_plugin.training.distributed import register_resolvers, slurm_layout
from asr_plugin.training.slurm_requeue import (
    AgreedFlag,
    StepBoundaryRequeue,
    apply_slurm_layout,
    next_requeue_checkpoint,
    slurm_job_id,
)

TRAIN = str(REPO_ROOT / "recipes" / "librispeech" / "train.py")
JOB = "4242"
# what srun gives the one task of a 1-node, 1-task job step (Lightning's SLURMEnvironment reads these)
SLURM_TASK = {
    "SLURM_JOB_ID": JOB,
    "SLURM_STEP_ID": "0",
    "SLURM_NTASKS": "1",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_NNODES": "1",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_JOB_NAME": "ls960",
    "SLURM_NODELIST": "localhost",
}


def slurm_task_env(tmp_path, **extra: str) -> dict[str, str]:
    """The environment of one SLURM task of a test's job (`SLURM_TASK` on a job-free environment, `extra` on
    top) whose ``scontrol`` is a stand-in that records the requeue request in ``tmp_path/scontrol.log``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.log"}\n')
    (bin_dir / "scontrol").chmod(0o755)
    env = job_free_env(**{**SLURM_TASK, **extra})
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}


def test_the_launcher_asks_sbatch_for_the_signal_lightning_listens_for(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[slurm]'")
    from hydra import compose, initialize_config_dir
    from lightning.fabric.plugins.environments import SLURMEnvironment
    from submitit.slurm.slurm import _make_sbatch_string

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="train",
            return_hydra_config=True,
            overrides=["hydra/launcher=slurm", f"paths.root_dir={tmp_path}"],
        )
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    sbatch = _make_sbatch_string(
        command="python train.py",
        folder=str(tmp_path),
        signal_delay_s=launcher["signal_delay_s"],
        additional_parameters=launcher["additional_parameters"],
    )
    wanted = SLURMEnvironment().requeue_signal  # SIGUSR1
    assert f"#SBATCH --signal={wanted.name.removeprefix('SIG')}@300" in sbatch.splitlines()


@pytest.mark.parametrize(
    ("variables", "layout"),
    [
        ({}, None),
        ({**SLURM_TASK, "SLURM_NTASKS": "16", "SLURM_NTASKS_PER_NODE": "8", "SLURM_JOB_NUM_NODES": "2"}, (8, 2)),
        ({**SLURM_TASK, "SLURM_JOB_NAME": "interactive"}, None),  # salloc shell: Lightning does not use SLURM
    ],
)
def test_slurm_layout_reads_the_job_variables(monkeypatch, variables, layout):
    for name in [n for n in os.environ if n.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert slurm_layout() == layout


def test_trainer_devices_and_nodes_follow_slurm(monkeypatch):
    for name, value in {
        **SLURM_TASK,
        "SLURM_NTASKS": "16",
        "SLURM_NTASKS_PER_NODE": "8",
        "SLURM_JOB_NUM_NODES": "2",
    }.items():
        monkeypatch.setenv(name, value)
    trainer = OmegaConf.create({"devices": -1, "num_nodes": 1})  # conf/trainer/ddp.yaml
    apply_slurm_layout(trainer)
    assert (trainer.devices, trainer.num_nodes) == (8, 2)
    with pytest.raises(ValueError, match=r"trainer\.devices=4 but this SLURM job has 8 tasks per node"):
        apply_slurm_layout(OmegaConf.create({"devices": 4, "num_nodes": 2}))


@pytest.mark.slow
def test_sigusr1_writes_a_checkpoint_and_the_requeued_job_resumes_from_it(data_dir, tmp_path):
    env = slurm_task_env(tmp_path)
    # no checkpoint but the requeue one: step checkpoints far apart, no validation
    overrides = [
        *TINY_RUN,
        "trainer.max_epochs=1000",
        "trainer.limit_val_batches=0",
        "ckpt_path=last",
        "callbacks.step_checkpoint.every_n_train_steps=100000",
        f"paths.data_dir={data_dir}",
        f"paths.log_dir={tmp_path}/logs",
    ]
    run_dir = tmp_path / "logs" / "train" / "runs" / f"slurm{JOB}.0"
    metrics = run_dir / "csv" / "metrics.csv"
    job = subprocess.Popen(
        [sys.executable, TRAIN, *overrides, "trainer.max_steps=100000"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while len(train_steps(metrics)) < 3:
            assert job.poll() is None and time.monotonic() < deadline, job.stderr.read()[-3000:]
            time.sleep(0.1)
        job.send_signal(signal.SIGUSR1)  # what sbatch --signal=USR1@300 sends before the time limit
        while not (run_dir / "hpc_ckpt_1.ckpt").exists() or not (tmp_path / "scontrol.log").exists():
            assert job.poll() is None and time.monotonic() < deadline, job.stderr.read()[-3000:]
            time.sleep(0.1)
        job.send_signal(signal.SIGKILL)  # SLURM ends the job it requeued
        job.wait(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", JOB]
    checkpoint = torch.load(run_dir / "hpc_ckpt_1.ckpt", weights_only=True)
    saved = checkpoint["global_step"]
    assert saved >= 3
    # written between optimizer steps (Lightning's handler wrote it wherever the signal landed: ready 5, completed 4)
    steps_done = checkpoint["loops"]["fit_loop"]["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]
    assert steps_done["step"]["total"] == {"ready": saved, "completed": saved}, steps_done

    requeued = subprocess.run(
        [sys.executable, TRAIN, *overrides, f"trainer.max_steps={saved + 2}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert requeued.returncode == 0, requeued.stderr[-3000:]
    assert f"ckpt_path=last resumes from {run_dir / 'hpc_ckpt_1.ckpt'}" in requeued.stdout + requeued.stderr
    assert f"steps: {saved + 2}" in requeued.stdout  # two more optimiser steps from the checkpoint's
    steps = train_steps(metrics)
    assert len([step for step in steps if step >= saved]) == 2 and len(steps) == len(set(steps)), (saved, steps)


@pytest.mark.slow
def test_a_signal_to_one_ddp_rank_checkpoints_both_at_the_same_step(data_dir, tmp_path, free_port):
    """Two srun tasks (gloo DDP); SIGUSR1 reaches rank 1 only: both ranks save at one step (a rank saving
    alone would wait forever in the checkpoint's barrier), rank 0 requeues once, and training goes on."""
    base = slurm_task_env(
        tmp_path, SLURM_NTASKS="2", SLURM_NTASKS_PER_NODE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port)
    )
    overrides = [
        *TINY_RUN,
        "trainer=ddp",
        "trainer.accelerator=cpu",
        "trainer.sync_batchnorm=false",
        "trainer.precision=32-true",
        "trainer.max_epochs=1000",
        "trainer.max_steps=100000",
        "trainer.limit_val_batches=0",
        "callbacks.step_checkpoint.every_n_train_steps=100000",
        f"paths.data_dir={data_dir}",
        f"paths.log_dir={tmp_path}/logs",
    ]
    run_dir = tmp_path / "logs" / "train" / "runs" / f"slurm{JOB}.0"
    metrics = run_dir / "csv" / "metrics.csv"
    ranks = [
        subprocess.Popen(
            [sys.executable, TRAIN, *overrides],
            cwd=tmp_path,
            env={**base, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]

    def running() -> bool:
        return all(rank.poll() is None for rank in ranks) and time.monotonic() < deadline

    try:
        deadline = time.monotonic() + 300
        while len(train_steps(metrics)) < 3:
            assert running(), [rank.stderr.read()[-2000:] for rank in ranks if rank.poll() is not None]
            time.sleep(0.1)
        ranks[1].send_signal(signal.SIGUSR1)
        while not (run_dir / "hpc_ckpt_1.ckpt").exists() or not (tmp_path / "scontrol.log").exists():
            assert running(), [rank.stderr.read()[-2000:] for rank in ranks if rank.poll() is not None]
            time.sleep(0.1)
        saved = torch.load(run_dir / "hpc_ckpt_1.ckpt", weights_only=True)["global_step"]
        while max(train_steps(metrics)) < saved + 2:  # both ranks left the checkpoint's barrier
            assert running(), [rank.stderr.read()[-2000:] for rank in ranks if rank.poll() is not None]
            time.sleep(0.1)
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait(timeout=60)
    logs = [rank.stderr.read() for rank in ranks]
    assert "Starting with 2 processes" in logs[0], logs[0][-3000:]  # one DDP job, not two single runs
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", JOB]
    assert sorted(p.name for p in run_dir.glob("hpc_ckpt_*.ckpt")) == ["hpc_ckpt_1.ckpt"]


def _agree(rank: int, flags: list[bool], port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=len(flags))
    try:
        results[rank] = AgreedFlag(flags[rank], torch.device("cpu")).any()
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.parametrize("flags", [[True, False], [False, True], [False, False], [True, True]])
def test_every_rank_reads_the_same_verdict(flags, free_port):
    manager = torch.multiprocessing.Manager()
    results = manager.dict()
    torch.multiprocessing.spawn(_agree, args=(flags, free_port, results), nprocs=len(flags))
    assert [results[rank] for rank in range(len(flags))] == [any(flags)] * len(flags)


def test_requeue_checkpoints_are_numbered_after_the_last_one(tmp_path, monkeypatch):
    assert next_requeue_checkpoint(tmp_path).name == "hpc_ckpt_1.ckpt"
    for name in ("hpc_ckpt_1.ckpt", "hpc_ckpt_7.ckpt", "hpc_ckpt_x.ckpt"):
        (tmp_path / name).touch()
    assert next_requeue_checkpoint(tmp_path).name == "hpc_ckpt_8.ckpt"
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    assert slurm_job_id() == "77"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "70")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert slurm_job_id() == "70_3"
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3; rm -rf /")
    with pytest.raises(ValueError, match="is not a number"):
        slurm_job_id()


def test_the_checkpoint_waits_for_the_last_batch_of_an_accumulated_step(tmp_path):
    trainer, callback = StubTrainer(tmp_path), StepBoundaryRequeue()
    before = signal.getsignal(signal.SIGUSR1)
    callback.setup(trainer, None, "fit")
    try:
        os.kill(os.getpid(), signal.SIGUSR1)  # the handler only takes note
        assert callback.requested and trainer.saved == []
        callback.on_train_batch_end(trainer, None, None, None, batch_idx=4)  # first of a step's two batches
        assert trainer.saved == []
        callback.on_train_batch_end(trainer, None, None, None, batch_idx=5)
        assert trainer.saved == ["hpc_ckpt_1.ckpt"] and not callback.requested
        callback.on_train_batch_end(trainer, None, None, None, batch_idx=7)  # once per signal
        assert trainer.saved == ["hpc_ckpt_1.ckpt"]
    finally:
        callback.teardown(trainer, None, "fit")
    assert signal.getsignal(signal.SIGUSR1) == before
