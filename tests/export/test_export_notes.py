"""An export prints none of torch's notes that it skips torchvision's operators (12 lines per export before:
torch's ONNX registry logs one per torchvision operator and file when torchvision is not installed)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from asr_plugin.export.onnx_export import OPSET
from asr_plugin.export.onnx_files import TORCHVISION_NOTE, write_onnx


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None, reason="torch notes only its absence")
def test_an_export_prints_no_torchvision_notes(tmp_path, capfd, caplog):
    module = torch.nn.Linear(3, 2)
    write_onnx(
        tmp_path / "linear.onnx", module, (torch.randn(2, 3),), ["x"], ["y"], ({0: torch.export.Dim.AUTO},), {}, OPSET
    )
    assert (tmp_path / "linear.onnx").is_file()
    assert TORCHVISION_NOTE not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.getMessage().startswith(TORCHVISION_NOTE)]  # pytest's own capture
