"""Build (once, cached) and load the transducer ops shipped as C++/CUDA sources in ``asr_plugin/csrc``.

Two libraries are built with ``torch.utils.cpp_extension.load``:

* the CPU library (``csrc/transducer.cpp``) defines the op schemas and the CPU kernels; it is built the
  first time any loss is computed;
* the CUDA library (``csrc/cuda/transducer_cuda.cu``) only registers CUDA kernels for the same ops; it is
  built lazily the first time a CUDA tensor arrives, so CPU users never wait for nvcc.

Each build directory is named after a hash of its sources (and the torch/CUDA versions), so a stale build
is never reused; torch's file lock in the build directory makes concurrent builds (DDP ranks) safe.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
from pathlib import Path

import torch

from . import _fake

_CSRC = Path(__file__).resolve().parent.parent / "csrc"
_CPU_SOURCES = (_CSRC / "transducer.cpp",)
_CUDA_SOURCES = (_CSRC / "cuda" / "transducer_cuda.cu",)
_HEADERS = (_CSRC / "transducer.h", _CSRC / "transducer_checks.h")
_DEFAULT_CUDA_HOME = Path("/usr/local/cuda")

_lock = threading.Lock()
_loaded: set[str] = set()


# Vector instruction sets for the CPU row loops, chosen by torch's own CPU detection (as ATen dispatches its
# kernels); the capability is part of the library name, so a shared cache never hands an AVX-512 build to
# a machine without it.
_VECTOR_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


def _cpu_capability() -> str:
    return torch.backends.cpu.get_cpu_capability()


def _vector_flags() -> list[str]:
    return _VECTOR_FLAGS.get(_cpu_capability(), [])


def _library_name(kind: str, sources: tuple[Path, ...]) -> str:
    digest = hashlib.sha256(f"{torch.__version__}|{torch.version.cuda}|{_cpu_capability()}".encode())
    for path in sources + _HEADERS:
        digest.update(path.read_bytes())
    return f"asr_plugin_transducer_{kind}_{digest.hexdigest()[:16]}"


def _cpp_extension():
    """``torch.utils.cpp_extension``, imported after defaulting $CUDA_HOME.

    torch resolves CUDA_HOME at import time from the first ``nvcc`` on PATH, which may be a wrapper script
    outside the toolkit (then it warns and guesses wrongly); prefer $CUDA_HOME / $CUDA_PATH, then
    /usr/local/cuda.
    """
    if "CUDA_HOME" not in os.environ and "CUDA_PATH" not in os.environ and (_DEFAULT_CUDA_HOME / "bin" / "nvcc").exists():
        os.environ["CUDA_HOME"] = str(_DEFAULT_CUDA_HOME)
    # On a machine without a GPU torch warns "No CUDA runtime is found" at import even when only the CPU
    # library is wanted; the CUDA library's build reports real toolkit problems itself.
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        logger.setLevel(level)
    return cpp_extension


def _check_host_compiler() -> None:
    cpp_extension = _cpp_extension()
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise RuntimeError(
            f"asr_plugin.losses needs a C++ compiler to build its ops, but {compiler!r} was not found: "
            "install one (e.g. `apt-get install g++`) or point $CXX at it."
        )
    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError as error:
        raise RuntimeError("asr_plugin.losses needs ninja to build its ops: `pip install ninja`.") from error


def _prepare_cuda_toolkit() -> None:
    """Point torch at a real CUDA toolkit and pick an architecture when no GPU is visible."""
    cpp_extension = _cpp_extension()
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or cpp_extension.CUDA_HOME
    if not cuda_home or not (Path(cuda_home) / "bin" / "nvcc").exists():
        raise RuntimeError(
            "asr_plugin.losses needs nvcc to build its CUDA ops: install the CUDA toolkit "
            f"{torch.version.cuda} (the version torch was built with) and set $CUDA_HOME to it."
        )
    cpp_extension.CUDA_HOME = cuda_home
    if "TORCH_CUDA_ARCH_LIST" not in os.environ and not torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"


def _load_unlocked(kind: str) -> None:
    cpp_extension = _cpp_extension()
    if kind in _loaded:
        return
    cuda = kind == "cuda"
    sources = _CUDA_SOURCES if cuda else _CPU_SOURCES
    if cuda:
        _prepare_cuda_toolkit()
    cpp_extension.load(
        name=_library_name(kind, sources),
        sources=[str(path) for path in sources],
        extra_include_paths=[str(_CSRC)],
        extra_cflags=["-O3", "-fopenmp-simd", *_vector_flags()],  # vectorise the row loops; no OpenMP runtime
        extra_cuda_cflags=["-O3"],
        with_cuda=cuda,
        is_python_module=False,
        verbose=os.environ.get("ASR_PLUGIN_VERBOSE_BUILD") == "1",
    )
    _loaded.add(kind)


def _build_and_load(kind: str) -> None:
    if kind in _loaded:
        return
    with _lock:
        _check_host_compiler()
        # The CUDA library registers kernels for schemas that the CPU library defines: load that one first.
        _load_unlocked("cpu")
        _fake.register()
        if kind == "cuda":
            _load_unlocked("cuda")


def ops_for(device: torch.device):
    """``torch.ops.asr_plugin`` with the kernels for ``device`` built and loaded."""
    if device.type not in ("cpu", "cuda"):
        raise TypeError(f"transducer loss: tensors on {device.type!r} are not supported (use cpu or cuda)")
    _build_and_load(device.type)
    return torch.ops.asr_plugin


def build_cuda_extension() -> None:
    """Compile (and load) the CUDA library now; used by tests to check the CUDA sources compile."""
    _build_and_load("cuda")
