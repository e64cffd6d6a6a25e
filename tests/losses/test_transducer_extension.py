"""Building the ops: missing tools are explained, build names follow the sources."""

import pytest
import torch

from asr_plugin.losses import _extension


def test_missing_compiler_is_explained(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(RuntimeError, match=r"needs a C\+\+ compiler .* install one"):
        _extension._check_host_compiler()


def test_missing_nvcc_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match="needs nvcc to build its CUDA ops: install the CUDA toolkit"):
        _extension._prepare_cuda_toolkit()


def test_build_names_hash_the_sources():
    cpu = _extension._library_name("cpu", _extension._CPU_SOURCES)
    cuda = _extension._library_name("cuda", _extension._CUDA_SOURCES)
    assert cpu.startswith("asr_plugin_transducer_cpu_") and cuda.startswith("asr_plugin_transducer_cuda_")
    assert cpu[-16:] != cuda[-16:]


def test_unsupported_device_is_explained():
    with pytest.raises(TypeError, match="tensors on 'meta' are not supported"):
        _extension.ops_for(torch.device("meta"))
