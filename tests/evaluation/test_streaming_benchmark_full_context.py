"""`benchmark_onnx.py --streaming` on a model that cannot stream (every attention context full) is refused before
any work, naming the file and what would stream, instead of failing after it on an empty table."""

from __future__ import annotations

import pytest
from test_evaluation_recipe import save_module_checkpoint


def test_a_full_context_model_is_refused_naming_the_file(corpus, tmp_path):
    from benchmarks.onnx import benchmark_onnx_streaming

    root, datamodule = corpus
    checkpoint = tmp_path / "offline.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1)
    with pytest.raises(ValueError, match=rf"{checkpoint}: .* all full context, nothing streams: .*mini_streaming"):
        benchmark_onnx_streaming(checkpoint, datamodule.split_manifest("dev"), tmp_path / "out")
    assert not (tmp_path / "out").exists()
