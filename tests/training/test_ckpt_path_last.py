"""``ckpt_path=last``: a plain local run resumes the newest earlier run with its config, or refuses naming the
runs it could have taken; a job with an id (ASR_RUN_ID, SLURM, torchrun) looks only in its own directory."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from train_configs import REPO_ROOT, TINY_RUN

from asr_plugin.training.ckpt_path import previous_run_checkpoint, resolve_ckpt_path

JOB_VARIABLES = ("ASR_RUN_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")
CONFIG = {
    "seed": 1234,
    "ckpt_path": None,
    "trainer": {"max_steps": 2},
    "paths": {"output_dir": "${hydra:runtime.output_dir}"},
}


def make_run(runs_dir: Path, name: str, config: dict | None, mtime: float, checkpoint: bytes | None = None) -> Path:
    """A run directory like Hydra and training leave it: .hydra/config.yaml (unless `config` is None) and
    checkpoints/last.ckpt (a small torch checkpoint, or the bytes `checkpoint`) modified at `mtime`."""
    run = runs_dir / name
    (run / "checkpoints").mkdir(parents=True)
    if config is not None:
        (run / ".hydra").mkdir()
        OmegaConf.save(OmegaConf.create(config), run / ".hydra" / "config.yaml")
    last = run / "checkpoints" / "last.ckpt"
    if checkpoint is None:
        torch.save({"epoch": 1, "global_step": int(mtime)}, last)
    else:
        last.write_bytes(checkpoint)
    os.utime(last, (mtime, mtime))
    return last


def resume(runs_dir: Path, config: dict = CONFIG) -> Path:
    this_run = runs_dir / "2026-12-01_12-00-00"
    this_run.mkdir(exist_ok=True)
    return previous_run_checkpoint(runs_dir, this_run, [Path("checkpoints")], {**config, "ckpt_path": "last"})


def test_the_newest_run_with_this_config_is_resumed_and_named(tmp_path, caplog):
    older = make_run(tmp_path, "2026-12-01_10-00-00", CONFIG, mtime=100)
    newer = make_run(tmp_path, "2026-12-01_09-00-00", CONFIG, mtime=200)  # started earlier, trained later
    make_run(tmp_path, "2026-12-01_11-00-00", {**CONFIG, "seed": 1}, mtime=300)  # newest, another config
    with caplog.at_level(logging.INFO):
        assert resume(tmp_path) == newer != older
    assert any(f"resuming {newer} (epoch 1, step 200)" in r.getMessage() for r in caplog.records)


def test_the_runs_it_could_have_taken_are_named_with_their_differences(tmp_path):
    other_steps = make_run(tmp_path, "a", {**CONFIG, "trainer": {"max_steps": 4}}, mtime=200)
    no_config = make_run(tmp_path, "b", None, mtime=100)
    with pytest.raises(ValueError) as refused:
        resume(tmp_path)
    message = str(refused.value)
    assert "no earlier run under" in message and "drop ckpt_path=last" in message
    assert f"{other_steps}: trainer.max_steps: 2 here, 4 in its config" in message
    assert f"{no_config}: no .hydra/config.yaml" in message
    assert message.index(str(other_steps)) < message.index(str(no_config)), "newest first"


def test_no_run_with_a_last_checkpoint_is_refused(tmp_path):
    (tmp_path / "2026-12-01_08-00-00" / "checkpoints").mkdir(parents=True)  # a run killed before its first save
    with pytest.raises(ValueError, match="nor does any other run there. Drop ckpt_path=last to train from scratch"):
        resume(tmp_path)


def test_an_unreadable_newest_checkpoint_is_skipped(tmp_path, caplog):
    readable = make_run(tmp_path, "a", CONFIG, mtime=100)
    broken = make_run(tmp_path, "b", CONFIG, mtime=200, checkpoint=b"")
    with caplog.at_level(logging.WARNING):
        assert resume(tmp_path) == readable
    assert any(f"skipping checkpoint {broken}: empty file" in r.getMessage() for r in caplog.records)


def test_a_damaged_run_config_is_named(tmp_path):
    last = make_run(tmp_path, "a", CONFIG, mtime=100)
    (last.parent.parent / ".hydra" / "config.yaml").write_text("seed: [unclosed\n")
    with pytest.raises(ValueError, match=r"a/checkpoints/last.ckpt: .hydra/config.yaml is unreadable \(\w+"):
        resume(tmp_path)


@pytest.mark.parametrize("variable", JOB_VARIABLES)
def test_a_job_with_an_id_keeps_its_own_lineage(tmp_path, monkeypatch, caplog, variable):
    """A first start of a job (a requeued job's first run) trains from scratch, never from another run."""
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    run_dir = tmp_path / "job"
    config = {**CONFIG, "paths": {"output_dir": str(run_dir), "runs_dir": str(tmp_path)}}
    make_run(tmp_path, "earlier", config, mtime=100)
    cfg = OmegaConf.create({**config, "ckpt_path": "last"})
    trainer = SimpleNamespace(
        checkpoint_callbacks=[SimpleNamespace(dirpath=str(run_dir / "checkpoints"))], default_root_dir=str(run_dir)
    )
    with pytest.raises(ValueError, match="earlier/checkpoints/last.ckpt: trainer.max_steps"):
        resolve_ckpt_path(OmegaConf.merge(cfg, {"trainer": {"max_steps": 3}}), trainer)  # plain: refused
    assert resolve_ckpt_path(cfg, trainer) == str(tmp_path / "earlier" / "checkpoints" / "last.ckpt")
    monkeypatch.setenv(variable, "42")
    with caplog.at_level(logging.WARNING):
        assert resolve_ckpt_path(cfg, trainer) is None
    assert any("no readable checkpoint of this run" in r.getMessage() for r in caplog.records)


def test_a_plain_multirun_job_is_refused_naming_asr_run_id(tmp_path, monkeypatch):
    """Its sweep directory is new: without ASR_RUN_ID the job could only start from scratch."""
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("asr_plugin.training.ckpt_path.is_multirun_job", lambda: True)
    run_dir = tmp_path / "multiruns" / "2026-12-01_10-00-00" / "0"
    cfg = OmegaConf.create(
        {"ckpt_path": "last", "paths": {"output_dir": str(run_dir), "runs_dir": str(tmp_path / "runs")}}
    )
    trainer = SimpleNamespace(
        checkpoint_callbacks=[SimpleNamespace(dirpath=str(run_dir / "checkpoints"))], default_root_dir=str(run_dir)
    )
    with pytest.raises(ValueError, match="multirun's directory .* is new .*set ASR_RUN_ID="):
        resolve_ckpt_path(cfg, trainer)
    monkeypatch.setenv("ASR_RUN_ID", "2026-12-01_10-00-00")
    assert resolve_ckpt_path(cfg, trainer) is None
    monkeypatch.delenv("ASR_RUN_ID")
    make_run(run_dir.parent, "1", CONFIG, mtime=100)  # a rerun of a sweep: another job saved, this one had not
    assert resolve_ckpt_path(cfg, trainer) is None


@pytest.mark.slow  # three train.py processes
def test_train_py_resumes_the_newest_run_of_the_same_command(data_dir, tmp_path):
    """Through Hydra: the config Hydra saved compares equal to the one a rerun composes."""
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    command = [
        sys.executable,
        str(REPO_ROOT / "recipes" / "librispeech" / "train.py"),
        *TINY_RUN,
        "trainer.max_steps=2",
        "trainer.limit_val_batches=0",
        f"paths.data_dir={data_dir}",
        f"paths.log_dir={tmp_path}/logs",
    ]

    def run(*overrides: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*command, *overrides], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
        )

    first = run()
    assert first.returncode == 0, first.stderr[-3000:]
    last = next(
        line.split(":", 1)[1].strip() for line in first.stdout.splitlines() if line.startswith("last checkpoint:")
    )
    resumed = run("ckpt_path=last")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {last} (epoch " in resumed.stdout + resumed.stderr
    assert "steps: 2 " in resumed.stdout, "resumed at its last step: nothing left to train"
    other = run("ckpt_path=last", "seed=7")
    assert other.returncode != 0
    assert f"{last}: seed: 7 here, 1234 in its config" in other.stderr


def test_a_siblings_alias_bomb_config_is_refused_at_once(tmp_path):
    """Read by the node-counted reader of `.nemo` configs: OmegaConf would expand it (and hang)."""
    last = make_run(tmp_path, "a", CONFIG, mtime=100)
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)]
    (last.parent.parent / ".hydra" / "config.yaml").write_text("\n".join(levels) + "\n")
    with pytest.raises(ValueError, match=r"a/checkpoints/last.ckpt: .hydra/config.yaml: the config expands to more"):
        resume(tmp_path)
