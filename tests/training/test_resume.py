"""Resuming: ``ckpt_path=last`` takes the newest readable checkpoint of this run directory, an unreadable
``ckpt_path`` is named, and a checkpoint of another architecture says which config keys differ."""

from __future__ import annotations

import csv
import logging
import os
import shutil

import pytest
import torch

from asr_plugin.training import train

pytestmark = pytest.mark.slow  # end-to-end training runs
STEP_CHECKPOINTS = ["callbacks.step_checkpoint.every_n_train_steps=1", "trainer.max_epochs=100"]


def _logged_steps(output_dir: str) -> list[int]:
    with open(f"{output_dir}/csv/metrics.csv") as file:
        return [int(row["step"]) for row in csv.DictReader(file) if row.get("train/loss_step")]


def test_last_skips_unreadable_checkpoints_and_names_them(tiny_run, caplog):
    first = tiny_run([*STEP_CHECKPOINTS, "trainer.max_steps=2"], run="requeued")
    train(first)
    checkpoints = f"{first.paths.output_dir}/checkpoints"
    shutil.copy(f"{checkpoints}/last.ckpt", f"{checkpoints}/step2.ckpt")
    os.utime(f"{checkpoints}/step2.ckpt", (1, 1))  # the oldest
    with open(f"{checkpoints}/last.ckpt", "r+b") as file:  # a kill in the middle of a copy onto last.ckpt
        file.truncate(1000)
    open(f"{first.paths.output_dir}/hpc_ckpt_1.ckpt", "wb").close()  # 0 bytes: the newest
    with caplog.at_level(logging.WARNING):
        result = train(tiny_run([*STEP_CHECKPOINTS, "ckpt_path=last", "trainer.max_steps=4"], run="requeued"))
    assert result["global_step"] == 4
    assert _logged_steps(first.paths.output_dir) == [0, 1, 2, 3], "resumed from step2.ckpt, the readable one"
    skipped = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert any("hpc_ckpt_1.ckpt: empty file" in m for m in skipped), skipped
    assert any("last.ckpt: not a readable torch checkpoint" in m for m in skipped), skipped


def test_last_never_resumes_another_runs_checkpoint_in_a_job(tiny_run, caplog, monkeypatch):
    """A job's run directory (ASR_RUN_ID here, a SLURM job, a torchrun rendezvous) is its lineage: another run
    of the same task is never taken (a plain local run's case: test_ckpt_path_last.py)."""
    monkeypatch.setenv("ASR_RUN_ID", "new")
    train(tiny_run([*STEP_CHECKPOINTS, "trainer.max_steps=3"], run="sibling"))
    with caplog.at_level(logging.WARNING):
        result = train(tiny_run([*STEP_CHECKPOINTS, "ckpt_path=last", "trainer.max_steps=2"], run="new"))
    assert result["global_step"] == 2 and _logged_steps(result["output_dir"]) == [0, 1]
    assert any("no readable checkpoint of this run" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("content", "reason"), [(b"", "empty file"), (os.urandom(4096), "not a readable torch checkpoint")]
)
def test_an_unreadable_ckpt_path_is_named(tiny_run, tmp_path, content, reason):
    path = tmp_path / "broken.ckpt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"ckpt_path: checkpoint {path}: {reason}"):
        train(tiny_run([f"ckpt_path={path}", "trainer.max_steps=1"]))


def test_resuming_another_architecture_names_the_differing_keys(tiny_run):
    saved = train(tiny_run([*STEP_CHECKPOINTS, "trainer.max_steps=1"], run="small"))["last_model_path"]
    with pytest.raises(
        ValueError,
        match=r"do not fit this model .*differ from the checkpoint's: model\.d_model: 48 "
        r"here, 32 in the checkpoint; model\.joint_dim",
    ):
        train(tiny_run([f"ckpt_path={saved}", "model.d_model=48", "model.joint_dim=40", "trainer.max_steps=2"]))
    with pytest.raises(ValueError, match=r"unexpected .*ctc\.output.*ctc_weight: 0 here, 0\.3 in the checkpoint"):
        train(tiny_run([f"ckpt_path={saved}", "ctc_weight=0", "trainer.max_steps=2"]))


def test_a_resumed_fine_tuning_needs_no_pretrained_file(tiny_run, tmp_path):
    """The checkpoint records which parameters were loaded and frozen: the optimizer's groups are rebuilt
    from it, and the pretrained file is not read again (here it is gone)."""
    pretrained = train(tiny_run(["trainer.max_steps=1"], run="pretrained"))["last_model_path"]
    moved = tmp_path / "pretrained.ckpt"
    shutil.copy(pretrained, moved)
    finetune = [
        "+finetune=from_checkpoint",
        f"finetune.path={moved}",
        "finetune.pretrained_lr=1e-4",
        "finetune.freeze_encoder_layers=-1",
        "validate_first=false",
    ]
    first = train(tiny_run([*STEP_CHECKPOINTS, *finetune, "trainer.max_steps=2"], run="tuned"))
    moved.unlink()
    result = train(tiny_run([*STEP_CHECKPOINTS, *finetune, "ckpt_path=last", "trainer.max_steps=3"], run="tuned"))
    assert result["global_step"] == 3
    before = torch.load(first["last_model_path"], weights_only=True)
    after = torch.load(result["last_model_path"], weights_only=True)
    assert after["asr_plugin"]["frozen"] == before["asr_plugin"]["frozen"] and after["asr_plugin"]["frozen"]
    encoder = [k for k in before["state_dict"] if k.startswith("model.encoder.")]
    assert all(torch.equal(before["state_dict"][k], after["state_dict"][k]) for k in encoder), "still frozen"


def test_resuming_with_another_tokenizer_of_the_same_size_is_refused_naming_both(tiny_run):
    """Same size, other pieces: the state dict fits, so only the record tells them apart."""
    saved = train(tiny_run([*STEP_CHECKPOINTS, "trainer.max_steps=1"], run="bpe"))["last_model_path"]
    with pytest.raises(
        ValueError,
        match=r"another tokenizer \(.*sha256.*\): this run's is SentencePiece sha256 "
        r"\w{12}, 48 ids.*the checkpoint's is SentencePiece sha256 \w{12}, 48 ids",
    ):
        train(tiny_run([f"ckpt_path={saved}", "data.tokenizer_type=unigram", "trainer.max_steps=2"]))


def test_the_records_are_compared_field_by_field():
    from types import SimpleNamespace

    from asr_plugin.training.resume_checks import check_resumable

    frontend = {"kind": "logmel", "options": {"num_mel_bins": 80}, "mean": [0.0] * 80, "std": [1.0] * 80}
    module = SimpleNamespace(records={"frontend": frontend})
    other = {**frontend, "mean": [0.5] * 80}
    with pytest.raises(ValueError, match=r"another frontend \(mean differ\).*mean=<80 values>"):
        check_resumable(module, {"asr_plugin": {"frontend": other}})
