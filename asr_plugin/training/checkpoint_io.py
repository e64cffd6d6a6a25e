"""Checkpoint files that are complete or absent: Lightning's ``CheckpointIO`` reading and writing through the
model-format seam (`asr_plugin.formats.checkpoint`: ``read_checkpoint``, ``write_checkpoint``).

Lightning's ``TorchCheckpointIO`` serialises into memory, then writes through an fsspec transaction whose
temporary file lies in ``TMPDIR``; when ``TMPDIR`` is another file system (``/dev/shm``, node-local scratch:
the usual case on clusters) the final step is a copy onto the checkpoint's name, so a job killed during it,
or a full disk, leaves a truncated ``last.ckpt`` where the good one was. Here ``torch.save`` writes a
temporary file next to the target, which is flushed, fsynced and renamed onto it; on any failure the
partial file is removed and the previous checkpoint stays. Loading is always ``weights_only=True``.
"""

from __future__ import annotations

import os
from typing import Any

from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from asr_plugin.formats.checkpoint import read_checkpoint, write_checkpoint


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` to a temporary file in the checkpoint's directory, then rename (local paths only)."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options (got {storage_options!r})")
        if "://" in str(path):  # Path("s3://b/x") is the local "s3:/b/x": refuse rather than write there
            raise ValueError(
                f"checkpoint path {path} is a URL; {type(self).__name__} writes local files only "
                "(a mounted directory for paths.log_dir, or trainer.plugins with a CheckpointIO of your own)"
            )
        write_checkpoint(checkpoint, path)

    def load_checkpoint(
        self,
        path: str | os.PathLike,
        map_location: Any = lambda storage, loc: storage,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        """`read_checkpoint` (``weights_only=True`` whatever the caller asks: nothing in a file runs), the tensors
        read into memory as Lightning's own load does."""
        return read_checkpoint(path, map_location=map_location, mmap=False)
