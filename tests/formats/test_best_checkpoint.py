"""``checkpoint=<run>/checkpoints`` (avg 1) is the best checkpoint by the metric its checkpoint callback recorded
(Lightning's ModelCheckpoint state, its mode included), not the newest; avg > 1 still averages the last ones."""

from __future__ import annotations

import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from asr_plugin.formats.checkpoint import select_checkpoints


def _save(path, score, mode="min"):
    key = ModelCheckpoint(monitor="val/wer", mode=mode).state_key  # how Lightning keys the callback's state
    state = {"monitor": "val/wer", "current_score": torch.tensor(score)}
    torch.save({"epoch": 0, "callbacks": {key: state}, "state_dict": {}}, path)


def test_a_directory_gives_its_best_checkpoint_by_the_recorded_metric(tmp_path):
    for epoch, wer in ((1, 0.30), (2, 0.21), (3, 0.25)):
        _save(tmp_path / f"epoch{epoch:03d}-wer{wer:.4f}.ckpt", wer)
    _save(tmp_path / "last.ckpt", 0.25)
    assert select_checkpoints(tmp_path) == [tmp_path / "epoch002-wer0.2100.ckpt"]
    assert [p.name for p in select_checkpoints(tmp_path, 2)] == ["epoch002-wer0.2100.ckpt", "epoch003-wer0.2500.ckpt"]
    for path in tmp_path.iterdir():  # a metric to maximise
        _save(path, -float(path.name.split("wer")[1].removesuffix(".ckpt")) if "wer" in path.name else 0.0, "max")
    assert select_checkpoints(tmp_path) == [tmp_path / "epoch002-wer0.2100.ckpt"]


def test_a_directory_without_recorded_scores_gives_its_newest(tmp_path):
    for epoch in (1, 2):
        torch.save({"epoch": epoch, "state_dict": {}}, tmp_path / f"epoch={epoch}-step={epoch * 10}.ckpt")
    assert select_checkpoints(tmp_path) == [tmp_path / "epoch=2-step=20.ckpt"]
