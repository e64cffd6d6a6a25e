"""A damaged or diverged checkpoint is never resumed silently: every checkpoint carries a content hash over all its
tensors that every read checks, and NaN or infinite weights are refused by name; ``ckpt_path=last`` passes over
such a newest checkpoint (naming it) to the next good one. torch itself checks no CRC: a flipped bit loads."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from tiny_models import tiny_transducer

from asr_plugin.formats.checkpoint import CONTENT_HASH_KEY, content_hash, load_model, read_checkpoint
from asr_plugin.training import TransducerModule
from asr_plugin.training.checkpoint_io import AtomicCheckpointIO
from asr_plugin.training.ckpt_path import resolve_ckpt_path

# a run of values whose bytes occur once in a checkpoint file: where the test flips a bit
MARKER = torch.arange(64, dtype=torch.float32) + 1234.5


def training_checkpoint(step: int, nan_weight: str | None = None) -> dict:
    """A TransducerModule-layout checkpoint of the tiny model, an optimizer state holding `MARKER`; `nan_weight`: a
    weight (relative to the model) with a NaN in it."""
    state = {f"model.{key}": value.clone() for key, value in tiny_transducer().state_dict().items()}
    if nan_weight is not None:
        state[f"model.{nan_weight}"].view(-1)[1] = float("nan")
    return {
        "state_dict": state,
        "optimizer_states": [{"state": {0: {"exp_avg": MARKER.clone(), "step": torch.tensor(float(step))}}}],
        "epoch": 0,
        "global_step": step,
    }


def flip_a_bit(path: Path) -> None:
    """Flips one bit of `MARKER`'s bytes in the file (torch stores tensors uncompressed), as a bad disk would."""
    data = bytearray(path.read_bytes())
    at = data.find(MARKER.numpy().tobytes())
    assert at > 0, "the marker's bytes are in the file"
    data[at + 5] ^= 0x10
    path.write_bytes(bytes(data))


def _moments(checkpoint: dict) -> dict:
    return checkpoint["optimizer_states"][0]["state"]


CHANGES = {
    "a byte": lambda c: _moments(c)[0]["exp_avg"].index_put_((torch.tensor(3),), torch.tensor(0.0)),
    "the dtype": lambda c: _moments(c)[0].update(exp_avg=MARKER.view(torch.int32)),  # the same bytes
    "the shape": lambda c: _moments(c)[0].update(exp_avg=MARKER.view(8, 8)),  # the same bytes
    "a key": lambda c: _moments(c).update({1: _moments(c).pop(0)}),
}


def test_the_hash_is_of_every_tensor_and_not_of_the_dict_order():
    checkpoint = training_checkpoint(3)
    digest = content_hash(checkpoint)
    assert digest["tensors"] == len(checkpoint["state_dict"]) + 2
    reordered = {key: checkpoint[key] for key in reversed(list(checkpoint))}
    reordered["state_dict"] = dict(reversed(list(checkpoint["state_dict"].items())))
    assert content_hash(reordered) == digest


@pytest.mark.parametrize("change", CHANGES)
def test_the_hash_changes_with_a_tensors_bytes_dtype_shape_or_key(change):
    checkpoint = training_checkpoint(3)
    digest = content_hash(checkpoint)
    CHANGES[change](checkpoint)
    assert content_hash(checkpoint) != digest


def test_a_flipped_bit_is_refused_by_every_read_naming_the_file(tmp_path):
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(training_checkpoint(3), path)
    assert read_checkpoint(path)[CONTENT_HASH_KEY]["tensors"] > 0
    flip_a_bit(path)
    assert torch.load(path, weights_only=True)["global_step"] == 3  # torch reads it without a word
    with pytest.raises(ValueError, match=rf"checkpoint {path}: damaged: its \d+ tensors do not hash to the SHA-256"):
        read_checkpoint(path)
    with pytest.raises(ValueError, match=rf"checkpoint {path}: damaged"):
        AtomicCheckpointIO().load_checkpoint(path)  # what Lightning's resume and test read with


def test_a_checkpoint_written_before_the_hash_loads_with_an_info_line(tmp_path, caplog):
    path = tmp_path / "old.ckpt"
    torch.save(training_checkpoint(3), path)
    with caplog.at_level(logging.INFO):
        assert read_checkpoint(path)["global_step"] == 3
    assert any(
        f"checkpoint {path}: written before checkpoints carried a content hash" in r.getMessage()
        for r in caplog.records
    )


def job(run_dir: Path, ckpt_path: str) -> tuple:
    """A job's config and a stand-in Trainer whose checkpoints go to `run_dir`/checkpoints."""
    cfg = OmegaConf.create(
        {"ckpt_path": ckpt_path, "paths": {"output_dir": str(run_dir), "runs_dir": str(run_dir.parent)}}
    )
    trainer = SimpleNamespace(
        checkpoint_callbacks=[SimpleNamespace(dirpath=str(run_dir / "checkpoints"))], default_root_dir=str(run_dir)
    )
    return cfg, trainer


def test_last_passes_over_a_damaged_and_a_diverged_newer_checkpoint_naming_them(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("ASR_RUN_ID", "job")  # a job looks in its own run directory only
    run_dir = tmp_path / "job"
    good, damaged, diverged = (
        run_dir / "checkpoints" / "step2.ckpt",
        run_dir / "checkpoints" / "last.ckpt",
        run_dir / "hpc_ckpt_1.ckpt",
    )
    oldest_first = [
        (good, training_checkpoint(2)),
        (damaged, training_checkpoint(4)),
        (diverged, training_checkpoint(5, "joint.output.weight")),
    ]
    for mtime, (path, checkpoint) in enumerate(oldest_first):
        AtomicCheckpointIO().save_checkpoint(checkpoint, path)
        os.utime(path, (1000 + mtime, 1000 + mtime))
    flip_a_bit(damaged)
    os.utime(damaged, (1001, 1001))
    with caplog.at_level(logging.WARNING):
        assert resolve_ckpt_path(*job(run_dir, "last")) == str(good)
    skipped = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert any(f"skipping checkpoint {damaged}: damaged" in m for m in skipped), skipped
    assert any(
        f"skipping {diverged}: hyper_parameters.model: weight joint.output.weight holds 1 NaN" in m for m in skipped
    )


def test_resuming_nan_weights_fails_naming_the_checkpoint_and_the_weight_as_decoding_does(tmp_path):
    path = tmp_path / "diverged.ckpt"
    AtomicCheckpointIO().save_checkpoint(training_checkpoint(3, "predictor.embedding.weight"), path)
    message = rf"{path}: hyper_parameters\.model: weight predictor\.embedding\.weight holds 1 NaN or infinite value"
    with pytest.raises(ValueError, match=rf"ckpt_path: {message}"):
        resolve_ckpt_path(*job(tmp_path / "run", str(path)))
    with pytest.raises(ValueError, match=message):
        AtomicCheckpointIO().load_checkpoint(path)  # Lightning's resume
    with pytest.raises(ValueError, match=message):
        TransducerModule.load_from_checkpoint(path)
    with pytest.raises(ValueError, match=message):
        load_model([path])  # eval.py's and transcribe.py's read


def test_a_nan_optimizer_moment_is_refused_by_resuming_and_passed_over_by_last(tmp_path, monkeypatch, caplog):
    """Finite weights beside a NaN ``exp_avg_sq``: the resumed run's first step would make every weight NaN."""
    monkeypatch.setenv("ASR_RUN_ID", "job")
    run_dir = tmp_path / "job"
    good, moments = run_dir / "checkpoints" / "step2.ckpt", run_dir / "checkpoints" / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(training_checkpoint(2), good)
    poisoned = training_checkpoint(4)
    _moments(poisoned)[0]["exp_avg_sq"] = torch.ones(64).index_fill_(0, torch.tensor([5]), float("nan"))
    AtomicCheckpointIO().save_checkpoint(poisoned, moments)
    os.utime(good, (1000, 1000))
    message = rf"checkpoint {moments}: optimizer tensor optimizer_states\[0\]\.state\[0\]\.exp_avg_sq holds 1 NaN"
    with pytest.raises(ValueError, match=rf"ckpt_path: {message}.*cannot be resumed"):
        resolve_ckpt_path(*job(run_dir, str(moments)))
    with caplog.at_level(logging.WARNING):
        assert resolve_ckpt_path(*job(run_dir, "last")) == str(good)
    assert any(f"skipping checkpoint {moments}: optimizer tensor" in r.getMessage() for r in caplog.records)
    assert read_checkpoint(moments)["global_step"] == 4  # decoding needs no optimizer: its read takes the file


def test_a_run_whose_every_checkpoint_is_damaged_is_refused_not_restarted(tmp_path, monkeypatch):
    """A requeued job would train from step 0 and overwrite the damaged last.ckpt at its first checkpoint."""
    monkeypatch.setenv("ASR_RUN_ID", "job")
    run_dir = tmp_path / "job"
    damaged, empty = run_dir / "checkpoints" / "last.ckpt", run_dir / "hpc_ckpt_1.ckpt"
    AtomicCheckpointIO().save_checkpoint(training_checkpoint(4), damaged)
    flip_a_bit(damaged)
    empty.write_bytes(b"")
    with pytest.raises(
        ValueError,
        match=r"every checkpoint of this run is damaged or diverged \((.*last\.ckpt.*"
        r"hpc_ckpt_1\.ckpt|.*hpc_ckpt_1\.ckpt.*last\.ckpt);.*run without ckpt_path=last",
    ):
        resolve_ckpt_path(*job(run_dir, "last"))
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    for path in (damaged, empty):
        path.unlink()
    assert resolve_ckpt_path(*job(run_dir, "last")) is None  # a first start: none at all
