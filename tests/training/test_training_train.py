"""train(cfg) end to end on the tiny mini corpus: both loss modes, resume after a crash, the recipe's multirun."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest
import torch
from train_configs import REPO_ROOT, TINY_RUN

from asr_plugin.training import train

pytestmark = pytest.mark.slow  # end-to-end training runs


@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_fast_dev_run_in_both_loss_modes_then_test_every_split(tiny_run, mode):
    cfg = tiny_run([f"+loss={mode}", "trainer.fast_dev_run=true", "test=true"])
    assert list(cfg.data.test_splits) == ["dev", "test-espeak", "test-piper"]
    result = train(cfg)
    assert result["global_step"] == 1 and result["test_weights"] == "last"  # fast_dev_run saves no checkpoint
    for key in (
        "train/loss_epoch",
        "val/loss",
        "val/wer",
        "test/dev/wer",
        "test/test-espeak/wer",
        "test/test-piper/wer",
        "test/test-piper/loss",
    ):
        assert torch.isfinite(torch.tensor(result["metrics"][key])), key


def _logged_steps(output_dir: str) -> list[int]:
    with open(f"{output_dir}/csv/metrics.csv") as file:
        return sorted({int(row["step"]) for row in csv.DictReader(file) if row.get("train/loss_step")})


def test_killed_run_resumes_from_last_checkpoint_without_losing_steps(tiny_run):
    every_step = ["callbacks.step_checkpoint.every_n_train_steps=1", "trainer.max_epochs=100"]
    crash = ["+callbacks.crash._target_=training_synthetic.CrashAfterSteps", "+callbacks.crash.steps=4"]
    killed = tiny_run(every_step + crash + ["trainer.max_steps=10"], run="killed")
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(killed)
    saved_step = torch.load(f"{killed.paths.output_dir}/checkpoints/last.ckpt", weights_only=False)["global_step"]
    assert saved_step >= 3

    # the requeued job: the same run directory (ASR_RUN_ID, the SLURM job id)
    resumed = tiny_run(every_step + ["ckpt_path=last", "trainer.max_steps=7"], run="killed")
    result = train(resumed)
    assert result["global_step"] == 7
    new_steps = _logged_steps(resumed.paths.output_dir)
    assert new_steps == list(range(7)), "metrics.csv keeps the killed run's steps and gains exactly the missing ones"
    assert result["last_model_path"].startswith(resumed.paths.output_dir)
    assert result["learning_curves"] == f"{resumed.paths.output_dir}/learning_curves.png"
    assert open(result["learning_curves"], "rb").read(4) == b"\x89PNG"


def test_ckpt_path_must_exist(tiny_run):
    with pytest.raises(ValueError, match="ckpt_path"):
        train(tiny_run(["ckpt_path=/nonexistent/model.ckpt", "trainer.max_steps=1"]))


def test_recipe_multirun_over_both_loss_modes(data_dir, tmp_path):
    sweep_dir = tmp_path / "sweep"
    command = [
        sys.executable,
        str(REPO_ROOT / "recipes" / "librispeech" / "train.py"),
        "-m",
        "+loss=batched,samplewise",
        *TINY_RUN,
        "trainer.max_steps=2",
        f"paths.data_dir={data_dir}",
        f"paths.log_dir={tmp_path}/logs",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    for job, mode in (("0", "batched"), ("1", "samplewise")):
        assert (sweep_dir / job / "checkpoints" / "last.ckpt").is_file()
        overrides = (sweep_dir / job / ".hydra" / "overrides.yaml").read_text()
        assert f"+loss={mode}" in overrides
        assert f"mode: {mode}" in (sweep_dir / job / ".hydra" / "config.yaml").read_text()
    assert done.stdout.count("last checkpoint:") == 2


def test_finetune_from_a_previous_run_uses_pretrained_lr_and_freezing(tiny_run):
    pretrained = train(tiny_run(["trainer.max_steps=1"], run="pretrained"))["last_model_path"]
    cfg = tiny_run(
        [
            "trainer.max_steps=2",
            "+finetune=from_checkpoint",
            f"finetune.path={pretrained}",
            "finetune.pretrained_lr=1e-4",
            "finetune.freeze_encoder_layers=-1",
        ],
        run="finetuned",
    )
    result = train(cfg)
    source = torch.load(pretrained, weights_only=False)["state_dict"]
    tuned = torch.load(result["last_model_path"], weights_only=False)["state_dict"]
    encoder = [key for key in source if key.startswith("model.encoder.")]
    assert encoder and all(torch.equal(source[key], tuned[key]) for key in encoder), "frozen encoder changed"
    assert not torch.equal(source["model.joint.output.weight"], tuned["model.joint.output.weight"])
    with open(f"{cfg.paths.output_dir}/csv/metrics.csv") as file:
        rows = [row for row in csv.DictReader(file) if row.get("train/lr/pretrained")]
    assert rows and all(float(row["train/lr/pretrained"]) <= 1e-4 for row in rows)


def _first_rows(output_dir: str) -> list[dict]:
    with open(f"{output_dir}/csv/metrics.csv") as file:
        return list(csv.DictReader(file))


def test_fine_tuning_validates_before_the_first_step(tiny_run):
    pretrained = train(tiny_run(["trainer.max_steps=2"], run="pretrained"))["last_model_path"]
    cfg = tiny_run(
        ["trainer.max_epochs=1", "+finetune=from_checkpoint", f"finetune.path={pretrained}", "test=true"], run="tuned"
    )
    result = train(cfg)
    assert set(result["start_metrics"]) == {"val/loss", "val/wer"}
    rows = _first_rows(cfg.paths.output_dir)
    first_train = next(i for i, row in enumerate(rows) if row.get("train/loss_step"))
    start = [row for row in rows[:first_train] if row.get("val/wer")]
    assert len(start) == 1 and start[0]["step"] == "0"
    assert float(start[0]["val/wer"]) == pytest.approx(result["start_metrics"]["val/wer"])
    # the validation at the end of the epoch found a best checkpoint: the test used it
    assert result["test_weights"] == "best" and result["best_model_path"]


def test_a_run_from_scratch_validates_first_only_when_asked(tiny_run):
    assert train(tiny_run(["trainer.max_steps=1"], run="plain"))["start_metrics"] == {}
    assert "val/wer" in train(tiny_run(["trainer.max_steps=1", "validate_first=true"], run="asked"))["start_metrics"]
