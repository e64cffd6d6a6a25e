"""Scale-out on existing engines, run as users launch them: Hydra multirun through hydra-submitit-launcher
(local executor), and Lightning DDP across two "nodes" (one CPU process each, on loopback)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from train_configs import REPO_ROOT, TINY_DATA, TINY_RUN
from two_nodes import run_two_nodes

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]  # subprocess launches of training runs

TRAIN = str(REPO_ROOT / "recipes" / "librispeech" / "train.py")


def _env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    for name in ("RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "SLURM_JOB_ID", "SLURM_PROCID", "ASR_RUN_ID"):
        env.pop(name, None)
    return {**env, **extra}


def test_submitit_local_launcher_runs_both_loss_modes(data_dir, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[slurm]'")
    command = [
        sys.executable,
        TRAIN,
        "-m",
        "hydra/launcher=submitit_local",
        "+loss=batched,samplewise",
        "hydra.launcher.timeout_min=10",
        *TINY_RUN,
        "trainer.max_steps=2",
        f"paths.data_dir={data_dir}",
        f"paths.log_dir={tmp_path}/logs",
    ]
    done = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    # one sweep directory (named by ${run_id:} in the launching process), one numbered job directory each
    sweeps = list((tmp_path / "logs" / "train" / "multiruns").iterdir())
    assert len(sweeps) == 1
    sweep_dir = sweeps[0]
    for job, mode in (("0", "batched"), ("1", "samplewise")):
        assert (sweep_dir / job / "checkpoints" / "last.ckpt").is_file()
        assert f"mode: {mode}" in (sweep_dir / job / ".hydra" / "config.yaml").read_text()
    # the jobs ran in submitit's worker processes: their logs are in its folder
    logs = list((sweep_dir / ".submitit").rglob("*_log.out"))
    assert len(logs) == 2 and all("last checkpoint:" in log.read_text() for log in logs)


def test_slurm_launcher_config_composes_with_gpus_per_task(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[slurm]'")
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from asr_plugin.training.distributed import register_resolvers

    register_resolvers()  # as the recipe does: the submitit folder lies in the ${run_id:} sweep directory
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="train",
            return_hydra_config=True,
            overrides=["hydra/launcher=slurm", "hydra.launcher.tasks_per_node=4", f"paths.root_dir={tmp_path}"],
        )
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert launcher["_target_"].endswith("SlurmLauncher")
    assert launcher["gpus_per_node"] == 4 and launcher["nodes"] == 1 and launcher["max_num_timeout"] > 0


def test_two_nodes_of_one_cpu_process_train_together_in_one_run_directory(tmp_path):
    """Node 0 prepares a fresh data directory while node 1 waits for it; both then run the same steps."""
    overrides = [
        *TINY_RUN,
        "trainer.max_steps=3",
        "trainer.max_epochs=100",
        "+trainer.sync_batchnorm=false",
        "callbacks.step_checkpoint.every_n_train_steps=1",
        f"paths.data_dir={tmp_path}/data",
        f"paths.log_dir={tmp_path}/logs",
    ]
    assert set(TINY_DATA) <= set(overrides)
    outputs = run_two_nodes(overrides, tmp_path, "two-nodes", timeout_s=400)
    runs = list((tmp_path / "logs" / "train" / "runs").iterdir())
    assert [run.name for run in runs] == ["two-nodes"]
    checkpoint = torch.load(runs[0] / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == 3
    # both processes joined one world of 2 and stopped after the same 3 steps
    assert "steps: 3" in outputs[0][0]
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in outputs[1][1] + outputs[1][0]
