"""Writing ONNX files: a module through torch's dynamo exporter, metadata, int8 quantisation; each written under a
temporary name and renamed when complete.

A model over `EXTERNAL_DATA_BYTES` of parameters (ONNX keeps one file under 2 GB; Parakeet-TDT 0.6B's float32
encoder is 2.4 GB) gets its weights in ``<name>.data`` next to it, as ONNX's external data: both are written
into a hidden temporary directory beside the target, then the weights and the model are renamed into place,
the model last.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from asr_plugin.files import fsync_path, write_atomic

EXTERNAL_DATA_BYTES = 1_800_000_000  # below protobuf's 2 GiB, with room for the graph
# torch's ONNX registry warns, at every export, that it skips torchvision's operators when torchvision is absent
# (4 lines per file written); no model here uses them
REGISTRY_LOGGER = "torch.onnx._internal.exporter._registration"
TORCHVISION_NOTE = "torchvision is not installed"


class TorchvisionNotes(logging.Filter):
    """Drops the registry's notes that torchvision's operators are skipped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(TORCHVISION_NOTE)


@contextlib.contextmanager
def without_torchvision_notes() -> Iterator[None]:
    """The registry's logger without `TorchvisionNotes` for the block."""
    logger, notes = logging.getLogger(REGISTRY_LOGGER), TorchvisionNotes()
    logger.addFilter(notes)
    try:
        yield
    finally:
        logger.removeFilter(notes)


def _export(
    module: torch.nn.Module,
    args: tuple,
    path: Path,
    names: Sequence[str],
    outputs: Sequence[str],
    dynamic: tuple[dict[int, Any], ...],
    opset: int,
    external: bool,
) -> None:
    """``torch.onnx.export`` through ``torch.export`` (the dynamo exporter), so that every axis in `dynamic` stays
    symbolic (the TorchScript exporter freezes nn.MultiheadAttention's reshapes at the example's length)."""
    with torch.no_grad(), warnings.catch_warnings(), without_torchvision_notes():
        # nn.LSTM re-assigns its flat weight list while tracing; the exporter's progress notes
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=list(names),
            output_names=list(outputs),
            dynamic_shapes=dynamic,
            opset_version=opset,
            dynamo=True,
            external_data=external,
            verbose=False,
        )


def set_metadata(path: Path, metadata: Mapping[str, str]) -> None:
    """Replaces the metadata of the ONNX file `path` in place (its external weights, if any, untouched)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    del model.metadata_props[:]
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))


def write_onnx(
    path: Path,
    module: torch.nn.Module,
    args: tuple,
    names: Sequence[str],
    outputs: Sequence[str],
    dynamic: tuple[dict[int, Any], ...],
    metadata: Mapping[str, str],
    opset: int,
) -> None:
    """Exports `module` called on `args` to `path` with `metadata` (external weights when it is large)."""
    size = sum(p.numel() * p.element_size() for p in module.parameters())
    if size <= EXTERNAL_DATA_BYTES:

        def write(tmp: Path) -> None:
            _export(module, args, tmp, names, outputs, dynamic, opset, external=False)
            set_metadata(tmp, metadata)

        write_atomic(path, write)
        return
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    staging.mkdir()
    try:
        _export(module, args, staging / path.name, names, outputs, dynamic, opset, external=True)
        set_metadata(staging / path.name, metadata)
        for written in sorted(staging.iterdir(), key=lambda p: p == staging / path.name):  # the model last
            fsync_path(written)
            os.replace(written, path.parent / written.name)
        fsync_path(path.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def linear_domain_matmuls(path: Path) -> list[str]:
    """Names of the MatMul nodes fed by an Exp: the feature adapter's map of mel energies, whose input spans
    ten orders of magnitude and would lose every quiet bin to 8-bit activations."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    exponentials = {output for node in graph.node if node.op_type == "Exp" for output in node.output}
    return [node.name for node in graph.node if node.op_type == "MatMul" and exponentials & set(node.input)]


def write_quantized(source: Path, target: Path, weight_type: str, metadata: Mapping[str, str]) -> None:
    """onnxruntime's dynamic quantisation of `source` ("QUInt8" or "QInt8" weights) to `target`, with `metadata`."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def write(tmp: Path) -> None:
        quantize_dynamic(
            str(source),
            str(tmp),
            weight_type=getattr(QuantType, weight_type),
            nodes_to_exclude=linear_domain_matmuls(source),
        )
        set_metadata(tmp, metadata)

    write_atomic(target, write)
