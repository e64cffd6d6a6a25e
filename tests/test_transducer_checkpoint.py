"""A checkpoint is data: every entry point that reads one builds only this project's classes.

The hostile checkpoints hold only dicts, strings, bytes and tensors, so ``torch.load(weights_only=True)`` reads
them; a node of theirs names ``torch.load`` of an embedded pickle with ``weights_only: False`` (the pickle
creates a marker file when unpickled), ``builtins.open`` or ``shutil.copyfile``. Before, Hydra's ``instantiate``
ran them from eval.py, transcribe.py, export_model.py, ``load_from_checkpoint`` and ``avg=N``.
"""

from __future__ import annotations

import os
import pathlib
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import TINY_SIZES, tiny_transducer

from asr_plugin.config_nodes import ConfigError
from asr_plugin.formats.checkpoint import load_model, read_checkpoint, select_checkpoints
from asr_plugin.training import TransducerModule

REPO_ROOT = Path(__file__).resolve().parents[1]
MODEL = {"_target_": "asr_plugin.models.build_transducer", "vocab_size": 7, **TINY_SIZES}
LOSS = {"_target_": "asr_plugin.losses.TransducerLoss", "mode": "batched"}
OPTIM = {
    "optimizer": {"_target_": "torch.optim.AdamW", "_partial_": True, "lr": 1e-3},
    "scheduler": {"_target_": "asr_plugin.training.schedulers.warmup_noam", "_partial_": True, "warmup_steps": 1},
}


class _TouchOnUnpickle:
    """Unpickling this creates `path`: the stand-in for any code a pickle can run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def torch_load_node(marker: Path) -> dict:
    """Hydra node: torch.load(io.BytesIO(<pickle>), weights_only=False), which runs the pickle."""
    return {
        "_target_": "torch.load",
        "weights_only": False,
        "f": {"_target_": "io.BytesIO", "initial_bytes": pickle.dumps(_TouchOnUnpickle(marker))},
    }


def save_checkpoint(path: Path, **hyper_parameters) -> Path:
    """A TransducerModule-layout checkpoint of the tiny model with the given hyper_parameters."""
    state = {f"model.{k}": v for k, v in tiny_transducer().state_dict().items()}
    torch.save(
        {
            "state_dict": state,
            "epoch": 0,
            "global_step": 1,
            "pytorch-lightning_version": "2.6.0",
            "hyper_parameters": {"model": MODEL, "loss": LOSS, "optim": OPTIM, **hyper_parameters},
        },
        path,
    )
    assert read_checkpoint(path)  # weights_only=True reads it: nothing but plain data and tensors
    return path


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "code-ran"


def test_the_payload_runs_code_when_hydra_builds_it(marker):
    """The hostile node is real: Hydra's instantiate runs it (what every entry point did before)."""
    from hydra.utils import instantiate

    with pytest.raises(Exception):  # noqa: B017 - the pickle's result is no tensor file; the code ran already
        instantiate(torch_load_node(marker))
    assert marker.exists()


def test_load_model_refuses_a_foreign_model_target(tmp_path, marker):
    path = save_checkpoint(tmp_path / "evil.ckpt", model=torch_load_node(marker))
    with pytest.raises(ConfigError, match=r"evil\.ckpt: hyper_parameters\.model\._target_='torch\.load' is refused"):
        load_model([path])
    assert not marker.exists()


def test_an_averaged_checkpoint_cannot_smuggle_a_target(tmp_path, marker):
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    save_checkpoint(directory / "epoch=0-step=1.ckpt")
    save_checkpoint(directory / "epoch=1-step=2.ckpt", model=torch_load_node(marker))
    with pytest.raises(ConfigError, match="torch.load"):
        load_model(select_checkpoints(directory, avg=2))
    assert not marker.exists()


@pytest.mark.parametrize("key", ["model", "loss", "spec_augment"])
def test_load_from_checkpoint_refuses_foreign_targets(tmp_path, marker, key):
    node = {"_target_": "torch.load", "f": str(tmp_path / "x"), "weights_only": False}
    if key == "model":
        node = torch_load_node(marker)
    path = save_checkpoint(tmp_path / "evil.ckpt", **{key: node})
    with pytest.raises(ConfigError, match=rf"{key}\._target_='torch\.load' is refused"):
        TransducerModule.load_from_checkpoint(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("key", "node"),
    [
        ("optimizer", {"_target_": "shutil.copyfile", "_partial_": True, "src": "/etc/hostname", "dst": "copied"}),
        ("scheduler", {"_target_": "builtins.open", "_partial_": True, "file": "opened", "mode": "w"}),
        ("optimizer", {"_target_": "torch.optim.lr_scheduler.LambdaLR", "_partial_": True}),
    ],
)
def test_optimiser_nodes_are_refused_before_anything_runs(tmp_path, key, node):
    path = save_checkpoint(tmp_path / "evil.ckpt", optim={**OPTIM, key: node})
    with pytest.raises(ConfigError, match=rf"optim\.{key}\._target_='{node['_target_']}' is refused"):
        TransducerModule.load_from_checkpoint(path)
    assert not (tmp_path / "copied").exists() and not (tmp_path / "opened").exists()


def test_a_nested_target_inside_an_allowed_node_is_refused(tmp_path, marker):
    path = save_checkpoint(tmp_path / "evil.ckpt", model={**MODEL, "d_model": torch_load_node(marker)})
    with pytest.raises(ConfigError, match=r"model\.d_model\._target_='torch\.load' is refused"):
        load_model([path])
    assert not marker.exists()


def test_interpolations_in_checkpoint_strings_are_never_resolved(tmp_path):
    path = save_checkpoint(tmp_path / "odd.ckpt", model={**MODEL, "attention": "${oc.env:HOME}"})
    with pytest.raises(ValueError, match=r"\$\{oc\.env:HOME\}"):  # the literal string reaches the encoder's check
        load_model([path])


@pytest.mark.slow
def test_export_script_refuses_a_hostile_checkpoint(tmp_path, marker):
    path = save_checkpoint(tmp_path / "evil.ckpt", model=torch_load_node(marker))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "export_model.py"),
            "--checkpoint",
            str(path),
            "--out",
            str(tmp_path / "export"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "'torch.load' is refused" in done.stderr, done.stderr[-2000:]
    assert not marker.exists() and not (tmp_path / "export").exists()
