"""Reading a NeMo ``.nemo`` file without NeMo: a tar of ``model_config.yaml``, ``model_weights.ckpt`` and
the tokenizer files the config names as ``nemo:<file>``. The file is only read."""

from __future__ import annotations

import gzip
import io
import lzma
import os
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from asr_plugin.declared_shapes import check_member_size
from asr_plugin.formats.nemo.plain_config import load_yaml_data, refuse_section_interpolations, resolve_references

CONFIG_NAME = "model_config.yaml"
WEIGHTS_NAME = "model_weights.ckpt"
ARTIFACT_PREFIX = "nemo:"
# Config and tokenizer files are read into memory: a tar header can claim gigabytes that a few compressed
# megabytes expand to, so anything but the (streamed) weights is refused above this size.
MAX_MEMBER_BYTES = 64 * 2**20
# The config is parsed by PyYAML's pure-Python composer (which can refuse aliases); NeMo's are under 100 kB.
MAX_CONFIG_BYTES = 4 * 2**20
# Members listed at most: NeMo's own archives hold under ten (a tar of 300,000 empty members took minutes to list).
MAX_MEMBERS = 1000
# What reading a cut or corrupt archive raises (a member past the end, a bad gzip or xz stream).
DAMAGED_ARCHIVE = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)
# The sections the importer reads (the model's and, `asr_plugin.formats.nemo.training_options`, the training
# settings'): an interpolation left in them is refused by key.
IMPORTED_SECTIONS = (
    "preprocessor",
    "encoder",
    "decoder",
    "joint",
    "tokenizer",
    "loss",
    "decoding",
    "spec_augment",
    "aux_ctc",
    "rnnt_reduction",
)


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
        name = reference[len(ARTIFACT_PREFIX) :]
        if name not in self.files:
            raise ValueError(f"{self.path}: {key} names {name!r}, which the archive does not contain")
        return self.files[name]


def is_nemo_archive(path: str | os.PathLike) -> bool:
    """True for a tar file holding ``model_config.yaml`` among its first `MAX_MEMBERS` members, or one that is
    damaged or holds more (so that `read_nemo` says what is wrong with it); the file is opened read-only, listed
    only as far as needed, and this never fails."""
    path = Path(path)
    try:
        if not path.is_file() or not tarfile.is_tarfile(path):
            return False
        with tarfile.open(path, "r:*") as tar:
            for count, member in enumerate(tar, 1):
                if count > MAX_MEMBERS or Path(member.name).name == CONFIG_NAME:
                    return True
        return False
    except DAMAGED_ARCHIVE:
        return True


def read_nemo(
    path: str | os.PathLike, weights: bool = True, max_member_bytes: int = MAX_MEMBER_BYTES, map_location: str = "cpu"
) -> NemoArchive:
    """Reads `path` (plain or gzip tar) into a `NemoArchive`; weights load with ``weights_only=True``,
    streamed from the archive (no second copy in memory). ``weights=False`` reads only the config and the
    small member files (``state_dict`` is then empty); ``map_location="meta"`` reads only the weights' metadata
    (shapes and dtypes, no data: what `asr_plugin.declared_shapes` compares with a declared architecture).
    Nothing is extracted to disk. The config is plain data (`asr_plugin.formats.nemo.plain_config`).

    Members are known by their base name, as NeMo writes them (``./model_config.yaml``), so two members of the
    same base name are refused rather than one silently winning; a member other than the weights larger than
    `max_member_bytes` is refused before it is read (the config above `MAX_CONFIG_BYTES`), and so is a weights
    member whose size differs from the bytes its tensors take (a gzip member that expands to gigabytes of
    padding).

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
    try:
        with tarfile.open(path, "r:*") as tar:
            # one pass: each member is read as the listing reaches it (a gzip archive is decompressed once)
            seen: dict[str, str] = {}
            for count, member in enumerate(tar, 1):
                if count > MAX_MEMBERS:
                    raise ValueError(
                        f"{path}: the archive holds more than {MAX_MEMBERS:,} members; a .nemo holds its config, "
                        "its weights and a few tokenizer files"
                    )
                if not member.isfile():
                    continue
                name = _unique_name(member, seen, path)
                if name == WEIGHTS_NAME:
                    state = _load_weights(tar.extractfile(member), member.size, path, map_location) if weights else {}
                    continue
                limit = min(max_member_bytes, MAX_CONFIG_BYTES) if name == CONFIG_NAME else max_member_bytes
                if member.size > limit:
                    raise ValueError(
                        f"{path}: member {member.name} is {member.size:,} bytes, over the limit of "
                        f"{limit:,} for a config or tokenizer file (read_nemo's max_member_bytes, "
                        f"MAX_CONFIG_BYTES for {CONFIG_NAME})"
                    )
                files[name] = tar.extractfile(member).read()
    except DAMAGED_ARCHIVE as err:
        raise ValueError(
            f"{path}: a damaged .nemo archive, cut short or corrupt ({type(err).__name__}: {err})"
        ) from None
    if CONFIG_NAME not in files or state is None:
        missing = CONFIG_NAME if CONFIG_NAME not in files else WEIGHTS_NAME
        raise ValueError(f"{path}: the archive has no {missing} (members: {sorted(files)[:8]})")
    try:
        text = files.pop(CONFIG_NAME).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: {CONFIG_NAME} is not UTF-8 text ({err})") from err
    return NemoArchive(path=path, config=_plain_config(text, path), state_dict=state, files=files)


def _plain_config(text: str, path: Path) -> dict[str, Any]:
    source = f"{path}: {CONFIG_NAME}"
    config = load_yaml_data(text, source)
    if not isinstance(config, dict):
        raise ValueError(f"{source} is not a mapping")
    config = resolve_references(config, source)
    refuse_section_interpolations(config, IMPORTED_SECTIONS, source)
    return config


def _unique_name(member: tarfile.TarInfo, seen: dict[str, str], path: Path) -> str:
    """The member's base name, recorded in `seen` (base name -> member name); ValueError naming both members when
    another one has it."""
    name = Path(member.name).name
    if name in seen:
        raise ValueError(
            f"{path}: members {seen[name]} and {member.name} share the name {name!r}; a .nemo file holds each file once"
        )
    seen[name] = member.name
    return name


def _load_weights(stream: io.IOBase, member_bytes: int, path: Path, map_location: str) -> dict[str, torch.Tensor]:
    """The state dict of the weights member: its metadata first (no data read), checked against the member's
    size, then (unless `map_location` is "meta") the tensors."""
    shapes = _state_dict(stream, path, "meta")
    check_member_size(shapes, member_bytes, f"{path}: {WEIGHTS_NAME}")
    if map_location == "meta":
        return shapes
    stream.seek(0)
    return _state_dict(stream, path, map_location)


def _state_dict(stream: io.IOBase, path: Path, map_location: str) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(stream, map_location=map_location, weights_only=True)
    except Exception as err:  # UnpicklingError, RuntimeError, EOFError for damaged files
        raise ValueError(f"{path}: {WEIGHTS_NAME} cannot be read as a state dict ({err})") from err
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: {WEIGHTS_NAME} is not a state dict of tensors")
    return state
