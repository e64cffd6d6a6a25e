"""Reading a NeMo ``.nemo`` file without NeMo: a tar of ``model_config.yaml``, ``model_weights.ckpt`` and
the tokenizer files the config names as ``nemo:<file>``. The file is only read."""

from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

CONFIG_NAME = "model_config.yaml"
WEIGHTS_NAME = "model_weights.ckpt"
ARTIFACT_PREFIX = "nemo:"


@dataclass
class NemoArchive:
    """The parts of a ``.nemo`` file: its model config, its state dict and its other member files by name."""

    path: Path
    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    files: dict[str, bytes] = field(default_factory=dict)

    def artifact(self, reference: str, key: str) -> bytes:
        """The bytes of a config value ``nemo:<name>`` (the config key `key` is named in errors)."""
        if not isinstance(reference, str) or not reference.startswith(ARTIFACT_PREFIX):
            raise ValueError(f"{self.path}: {key}={reference!r} is not a file inside the archive ('nemo:<name>')")
        name = reference[len(ARTIFACT_PREFIX):]
        if name not in self.files:
            raise ValueError(f"{self.path}: {key} names {name!r}, which the archive does not contain")
        return self.files[name]


def is_nemo_archive(path: str | os.PathLike) -> bool:
    """True for a tar file holding ``model_config.yaml`` (the file is opened read-only)."""
    path = Path(path)
    if not path.is_file() or not tarfile.is_tarfile(path):
        return False
    with tarfile.open(path, "r:*") as tar:
        return any(Path(name).name == CONFIG_NAME for name in tar.getnames())


def _resolved_config(text: str, path: Path) -> dict[str, Any]:
    """The YAML model config with ``${model.x}``-style interpolations resolved, section by section.

    NeMo may save interpolations unresolved, some pointing outside the model config (``${trainer.max_steps}``
    in ``optim``); a section that cannot be resolved is kept as written (the importer reads only
    ``preprocessor``, ``encoder``, ``decoder``, ``joint``, ``tokenizer`` and ``loss``).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    config = yaml.safe_load(text)
    if not isinstance(config, dict):
        raise ValueError(f"{path}: {CONFIG_NAME} is not a mapping")
    root = OmegaConf.create({"model": config})
    resolved = {}
    for key in config:
        try:
            node = root.model[key]
            resolved[key] = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
        except OmegaConfBaseException:
            resolved[key] = config[key]
    return resolved


def read_nemo(path: str | os.PathLike, weights: bool = True) -> NemoArchive:
    """Reads `path` (plain or gzip tar) into a `NemoArchive`; weights load with ``weights_only=True``,
    streamed from the archive (no second copy in memory). ``weights=False`` reads only the config and the
    small member files (``state_dict`` is then empty).

    Raises FileNotFoundError when the file is missing and ValueError naming the file when it is not a
    ``.nemo`` archive or lacks its config or weights.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"NeMo checkpoint {path} does not exist")
    if not tarfile.is_tarfile(path):
        raise ValueError(f"{path}: not a .nemo file (a tar archive)")
    files: dict[str, bytes] = {}
    state = None
    with tarfile.open(path, "r:*") as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if not member.isfile():
                continue
            if name == WEIGHTS_NAME:
                state = _load_weights(tar.extractfile(member), path) if weights else {}
            else:
                files[name] = tar.extractfile(member).read()
    if CONFIG_NAME not in files or state is None:
        missing = CONFIG_NAME if CONFIG_NAME not in files else WEIGHTS_NAME
        raise ValueError(f"{path}: the archive has no {missing} (members: {sorted(files)[:8]})")
    config = _resolved_config(files.pop(CONFIG_NAME).decode("utf-8"), path)
    return NemoArchive(path=path, config=config, state_dict=state, files=files)


def _load_weights(stream: io.IOBase, path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(stream, map_location="cpu", weights_only=True)
    except Exception as err:  # UnpicklingError, RuntimeError, EOFError for damaged files
        raise ValueError(f"{path}: {WEIGHTS_NAME} cannot be read as a state dict ({err})") from err
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: {WEIGHTS_NAME} is not a state dict of tensors")
    return state
