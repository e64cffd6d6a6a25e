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
# Config and tokenizer files are read into memory: a tar header can claim gigabytes that a few compressed
# megabytes expand to, so anything but the (streamed) weights is refused above this size.
MAX_MEMBER_BYTES = 64 * 2**20


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

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: {CONFIG_NAME} is not valid YAML ({err})") from err
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


def read_nemo(path: str | os.PathLike, weights: bool = True, max_member_bytes: int = MAX_MEMBER_BYTES) -> NemoArchive:
    """Reads `path` (plain or gzip tar) into a `NemoArchive`; weights load with ``weights_only=True``,
    streamed from the archive (no second copy in memory). ``weights=False`` reads only the config and the
    small member files (``state_dict`` is then empty). Nothing is extracted to disk.

    Members are known by their base name, as NeMo writes them (``./model_config.yaml``), so two members of the
    same base name are refused rather than one silently winning; a member other than the weights larger than
    `max_member_bytes` is refused before it is read.

    Raises FileNotFoundError when the file is missing and ValueError naming the file (and the member) when it
    is not a ``.nemo`` archive, lacks its config or weights, or breaks the rules above.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"NeMo checkpoint {path} does not exist")
    if not tarfile.is_tarfile(path):
        raise ValueError(f"{path}: not a .nemo file (a tar archive)")
    files: dict[str, bytes] = {}
    state = None
    with tarfile.open(path, "r:*") as tar:
        members = [member for member in tar.getmembers() if member.isfile()]
        _refuse_duplicate_names(members, path)
        for member in members:
            name = Path(member.name).name
            if name == WEIGHTS_NAME:
                state = _load_weights(tar.extractfile(member), path) if weights else {}
                continue
            if member.size > max_member_bytes:
                raise ValueError(f"{path}: member {member.name} is {member.size:,} bytes, over the limit of "
                                 f"{max_member_bytes:,} for a config or tokenizer file (read_nemo's max_member_bytes)")
            files[name] = tar.extractfile(member).read()
    if CONFIG_NAME not in files or state is None:
        missing = CONFIG_NAME if CONFIG_NAME not in files else WEIGHTS_NAME
        raise ValueError(f"{path}: the archive has no {missing} (members: {sorted(files)[:8]})")
    try:
        text = files.pop(CONFIG_NAME).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: {CONFIG_NAME} is not UTF-8 text ({err})") from err
    return NemoArchive(path=path, config=_resolved_config(text, path), state_dict=state, files=files)


def _refuse_duplicate_names(members: list[tarfile.TarInfo], path: Path) -> None:
    by_name: dict[str, str] = {}
    for member in members:
        name = Path(member.name).name
        if name in by_name:
            raise ValueError(f"{path}: members {by_name[name]} and {member.name} share the name {name!r}; "
                             "a .nemo file holds each file once")
        by_name[name] = member.name


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
