"""The run summary's last checkpoint is the last.ckpt on disk when no callback recorded saving it (the conf's epoch
and step callbacks share the file), never "(none)" while it exists."""

from __future__ import annotations

from lightning.pytorch.callbacks import ModelCheckpoint
from train_configs import quiet_cpu_trainer

from asr_plugin.training.run_report import last_checkpoint_path


def test_the_last_checkpoint_on_disk_is_reported(tmp_path):
    callback = ModelCheckpoint(dirpath=tmp_path, save_last=True, save_top_k=0)
    trainer = quiet_cpu_trainer(enable_checkpointing=True, callbacks=[callback])
    assert last_checkpoint_path(trainer) == ""
    (tmp_path / "last.ckpt").write_bytes(b"")
    assert last_checkpoint_path(trainer) == str(tmp_path / "last.ckpt")
    callback.last_model_path = str(tmp_path / "epoch3.ckpt")  # what a callback records wins
    assert last_checkpoint_path(trainer) == str(tmp_path / "epoch3.ckpt")
