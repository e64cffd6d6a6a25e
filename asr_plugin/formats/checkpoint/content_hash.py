"""A training checkpoint's content hash: what tells a damaged checkpoint from a good one.

``torch.load`` checks no CRC: a bit flip in a tensor's bytes (a bad disk, a partial copy, a file system bug)
loads silently and trains on, a block of NaN crashes at the first step naming nothing. So every checkpoint the
project writes carries a SHA-256 over every tensor it holds (the model's weights, the optimizer's moments, a
callback's state), each as its key path, dtype, shape and bytes, in the order of the sorted key paths (so the
hash does not depend on the order of a dict), and every read recomputes it (`verify_content_hash`). The other
values of a checkpoint (epochs, hyper-parameters, records) are small pickled data whose damage ``torch.load``
itself reports.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import torch

log = logging.getLogger(__name__)

# The checkpoint key of the hash (a top-level key of its own: it covers everything else).
CONTENT_HASH_KEY = "asr_plugin_content_hash"


def _key(parent: str, name: Any) -> str:
    name = name if isinstance(name, str) else repr(name)  # an optimizer's state is keyed by int
    return f"{parent}.{name}" if parent else name


def tensors(value: Any, key: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """(key path, tensor) of every tensor under `value`, mappings, lists and tuples followed."""
    if isinstance(value, torch.Tensor):
        yield key, value
    elif isinstance(value, Mapping):
        for name, child in value.items():
            yield from tensors(child, _key(key, name))
    elif isinstance(value, (list, tuple)):
        for index, child in enumerate(value):
            yield from tensors(child, f"{key}[{index}]")


def content_hash(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """``{"sha256": hex digest, "tensors": count}`` of the tensors of `checkpoint` (its hash entry left out)."""
    digest = hashlib.sha256()
    found = sorted(tensors({k: v for k, v in checkpoint.items() if k != CONTENT_HASH_KEY}), key=lambda item: item[0])
    for key, tensor in found:
        data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()  # (bytes,), no copy on CPU
        digest.update(f"{key}\0{tensor.dtype}\0{tuple(tensor.shape)}\0{data.nbytes}\0".encode())
        digest.update(memoryview(data))
    return {"sha256": digest.hexdigest(), "tensors": len(found)}


def with_content_hash(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `checkpoint` (shallow) carrying its content hash under `CONTENT_HASH_KEY`."""
    return {**checkpoint, CONTENT_HASH_KEY: content_hash(checkpoint)}


def verify_content_hash(checkpoint: Mapping[str, Any], source: str) -> None:
    """ValueError naming `source` when `checkpoint`'s tensors do not hash to what it recorded when it was
    written; a checkpoint written before checkpoints carried the hash is read as it is, with an info line."""
    recorded = checkpoint.get(CONTENT_HASH_KEY)
    if recorded is None:
        log.info("%s: written before checkpoints carried a content hash; its tensors are not verified", source)
        return
    found = content_hash(checkpoint)
    if not isinstance(recorded, Mapping) or recorded.get("sha256") != found["sha256"]:
        count = recorded.get("tensors") if isinstance(recorded, Mapping) else None
        raise ValueError(
            f"{source}: damaged: its {found['tensors']} tensors do not hash to the SHA-256 recorded when it was "
            f"written ({count} tensors); the file changed after it was written (a bit flip, a partial copy)"
        )
