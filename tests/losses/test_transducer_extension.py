"""Building the ops: missing tools are explained, library names hash the sources' contents, and a prebuilt
directory without the library is named. The subprocess cases (kill -9 during a build, concurrent builds,
another checkout, the ahead-of-time command) are in test_transducer_build.py."""

import pytest
import torch

from asr_plugin.losses import extension


def test_missing_compiler_is_explained(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(RuntimeError, match=r"needs a C\+\+ compiler .* install one .* \$ASR_PLUGIN_EXTENSION_DIR"):
        extension.check_host_compiler()


def test_missing_nvcc_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match="needs nvcc to build its CUDA ops: install the CUDA toolkit"):
        extension.prepare_cuda_toolkit()


def test_library_names_hash_the_sources_and_the_build(monkeypatch):
    cpu, cuda = extension.library_spec("cpu"), extension.library_spec("cuda")
    assert cpu.name.startswith("asr_plugin_transducer_cpu_") and cuda.name.startswith("asr_plugin_transducer_cuda_")
    assert cpu.name[-16:] != cuda.name[-16:] and cpu.filename == cpu.name + ".so"
    names = {}
    for arch in ("8.0", "9.0"):
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arch)
        names[arch] = (extension.library_spec("cpu").name, extension.library_spec("cuda").name)
    assert names["8.0"][0] == names["9.0"][0] == cpu.name  # the CPU library does not depend on it
    assert names["8.0"][1] != names["9.0"][1]  # a library for other GPUs is another file


def test_unsupported_device_is_explained():
    with pytest.raises(TypeError, match="tensors on 'meta' are not supported"):
        extension.ops_for(torch.device("meta"))


def test_prebuilt_directory_without_the_library_is_named(tmp_path):
    (tmp_path / "asr_plugin_transducer_cpu_0123456789abcdef.so").write_bytes(b"")
    spec = extension.library_spec("cpu")
    with pytest.raises(
        RuntimeError,
        match=rf"ASR_PLUGIN_EXTENSION_DIR={tmp_path} has no {spec.filename}.*"
        r"holds \['asr_plugin_transducer_cpu_0123456789abcdef.so'\].*python -m asr_plugin.losses.build --out",
    ):
        extension.prebuilt_path(spec, tmp_path)
    with pytest.raises(RuntimeError, match="the directory does not exist"):
        extension.prebuilt_path(spec, tmp_path / "missing")
