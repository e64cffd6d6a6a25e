"""Build (once, cached) and load the transducer ops shipped as C++/CUDA sources in ``asr_plugin/csrc``.

Two libraries:

* the CPU library (``csrc/transducer.cpp``, ``csrc/tdt.cpp``) defines the op schemas and the CPU kernels; it
  is built the first time any loss is computed;
* the CUDA library (``csrc/cuda/*.cu``) only registers CUDA kernels for the same ops; it is
  built lazily the first time a CUDA tensor arrives, so CPU users never wait for nvcc.

Where a library comes from, in order:

1. ``$ASR_PLUGIN_EXTENSION_DIR`` (a prebuilt directory, e.g. from ``python -m asr_plugin.losses.build --out
   DIR``): the library is loaded from there and never built; a missing file is an error naming it.
2. The cache, ``$TORCH_EXTENSIONS_DIR/asr_plugin`` (default ``~/.cache/torch_extensions/asr_plugin``): one
   file per library, ``asr_plugin_transducer_<kind>_<hash>.so``, where the hash covers the sources' and
   headers' *contents* (not their paths), the compiler flags, torch, CUDA, Python and the CPU's vector
   capability. Another checkout of the same sources, in any folder, loads the same file.
3. Otherwise the library is built: under an exclusive ``flock`` on ``<name>.lock`` in the cache (the kernel
   releases it when its holder exits, even by kill -9, so a dead builder never blocks anyone), in a private
   temporary directory ``.build-<host>-<pid>-<random>`` next to the cache, and the finished file is renamed
   into the cache (atomic on one file system: a reader sees either no file or a complete one). Processes
   that wait for the lock load the file the winner renamed; a builder killed half-way leaves only its
   temporary directory, which the next builder removes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from . import _fake
from .backends import resolve_backend

PREBUILT_ENV = "ASR_PLUGIN_EXTENSION_DIR"
KINDS = ("cpu", "cuda")
_CSRC = Path(__file__).resolve().parent.parent / "csrc"
_SOURCES = {
    "cpu": (_CSRC / "transducer.cpp", _CSRC / "tdt.cpp"),
    "cuda": (_CSRC / "cuda" / "transducer_cuda.cu", _CSRC / "cuda" / "tdt_cuda.cu"),
}
# What each library's sources include: the CPU one only csrc/*.h, so editing a CUDA header rebuilds no CPU library.
_HEADERS = {
    "cpu": tuple(sorted(_CSRC.glob("*.h"))),
    "cuda": tuple(sorted([*_CSRC.glob("*.h"), *_CSRC.glob("cuda/*.cuh")])),
}
_DEFAULT_CUDA_HOME = Path("/usr/local/cuda")
_BUILD_PREFIX = ".build-"
# A builder that holds the lock longer than this is presumed stuck (not dead: the kernel would have released
# the lock); the waiter then builds in its own temporary directory anyway.
LOCK_TIMEOUT_S = 15 * 60
_logger = logging.getLogger(__name__)

_lock = threading.Lock()
_loaded: dict[str, Library] = {}  # kind -> the library loaded into this process


# Vector instruction sets for the CPU row loops, chosen by torch's own CPU detection (as ATen dispatches its
# kernels); the capability is part of the library's hash, so a shared cache never hands an AVX-512 build to
# a machine without it.
_VECTOR_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


def _cpu_capability() -> str:
    return torch.backends.cpu.get_cpu_capability()


def _cflags() -> list[str]:
    # vectorise the row loops; no OpenMP runtime
    return ["-O3", "-fopenmp-simd", *_VECTOR_FLAGS.get(_cpu_capability(), [])]


_CUDA_CFLAGS = ["-O3"]


@dataclass(frozen=True)
class LibrarySpec:
    """What one library is built from; ``name`` hashes all of it."""

    kind: str  # "cpu" or "cuda"
    sources: tuple[Path, ...]
    name: str  # asr_plugin_transducer_<kind>_<16 hex digits>

    @property
    def filename(self) -> str:
        return self.name + ".so"


def _cuda_arch_list() -> str:
    """The architectures a CUDA build targets: $TORCH_CUDA_ARCH_LIST, else the visible GPUs' (as torch does),
    else 9.0 (Hopper) on a machine without a GPU."""
    if "TORCH_CUDA_ARCH_LIST" in os.environ:
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    capabilities = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
    return ";".join(f"{major}.{minor}" for major, minor in sorted(capabilities)) or "9.0"


def library_spec(kind: str) -> LibrarySpec:
    """The library of `kind` for these sources, this torch, Python and machine."""
    if kind not in KINDS:
        raise ValueError(f"library kind must be one of {KINDS}, got {kind!r}")
    sources = _SOURCES[kind]
    flags = _cflags() + (_CUDA_CFLAGS + [_cuda_arch_list()] if kind == "cuda" else [])
    context = [torch.__version__, str(torch.version.cuda), sys.version.split()[0], _cpu_capability(), *flags]
    context.append(os.environ.get("CXX", "c++"))
    digest = hashlib.sha256("|".join(context).encode())
    for path in sources + _HEADERS[kind]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return LibrarySpec(kind, sources, f"asr_plugin_transducer_{kind}_{digest.hexdigest()[:16]}")


def cache_dir() -> Path:
    """``$TORCH_EXTENSIONS_DIR/asr_plugin`` (torch's default extension root when unset)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or _cpp_extension().get_default_build_root()
    return Path(root).expanduser() / "asr_plugin"


def _cpp_extension():
    """``torch.utils.cpp_extension``, imported after defaulting $CUDA_HOME.

    torch resolves CUDA_HOME at import time from the first ``nvcc`` on PATH, which may be a wrapper script
    outside the toolkit (then it warns and guesses wrongly); prefer $CUDA_HOME / $CUDA_PATH, then
    /usr/local/cuda.
    """
    if (
        "CUDA_HOME" not in os.environ
        and "CUDA_PATH" not in os.environ
        and (_DEFAULT_CUDA_HOME / "bin" / "nvcc").exists()
    ):
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


def check_host_compiler() -> None:
    cpp_extension = _cpp_extension()
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise RuntimeError(
            f"asr_plugin.losses needs a C++ compiler to build its ops, but {compiler!r} was not found: "
            f"install one (e.g. `apt-get install g++`) or point $CXX at it, or load prebuilt libraries with "
            f"${PREBUILT_ENV} (`python -m asr_plugin.losses.build --out DIR` on a machine that has one)."
        )
    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError as error:
        raise RuntimeError("asr_plugin.losses needs ninja to build its ops: `pip install ninja`.") from error


def prepare_cuda_toolkit() -> None:
    """Point torch at a real CUDA toolkit and pick an architecture when no GPU is visible."""
    cpp_extension = _cpp_extension()
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or cpp_extension.CUDA_HOME
    if not cuda_home or not (Path(cuda_home) / "bin" / "nvcc").exists():
        raise RuntimeError(
            "asr_plugin.losses needs nvcc to build its CUDA ops: install the CUDA toolkit "
            f"{torch.version.cuda} (the version torch was built with) and set $CUDA_HOME to it."
        )
    cpp_extension.CUDA_HOME = cuda_home
    os.environ["TORCH_CUDA_ARCH_LIST"] = _cuda_arch_list()  # what the library's hash names


def prebuilt_path(spec: LibrarySpec, directory: Path) -> Path:
    path = directory / spec.filename
    if not path.is_file():
        present = sorted(p.name for p in directory.glob("asr_plugin_transducer_*.so")) if directory.is_dir() else None
        found = "the directory does not exist" if present is None else f"it holds {present or 'no asr_plugin library'}"
        raise RuntimeError(
            f"${PREBUILT_ENV}={directory} has no {spec.filename}, the {spec.kind} library of these sources for torch "
            f"{torch.__version__}, Python {sys.version.split()[0]} and this CPU ({found}). Rebuild it with "
            f"`python -m asr_plugin.losses.build --out {directory}{' --cuda' if spec.kind == 'cuda' else ''}` "
            f"from this checkout, or unset {PREBUILT_ENV} to build into the cache."
        )
    return path


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _remove_dead_builds(directory: Path) -> None:
    """Remove temporary build directories whose builder (on this host) is gone. Called under the build lock."""
    host = socket.gethostname()
    for path in directory.glob(_BUILD_PREFIX + "*"):
        # .build-<host>-<pid>-<random>; a host name may contain '-'
        parts = path.name[len(_BUILD_PREFIX) :].rsplit("-", 2)
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and not _process_alive(int(parts[1])):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _build_lock(path: Path, timeout_s: float) -> Iterator[bool]:
    """An exclusive ``flock`` on `path`, waited for up to `timeout_s`; yields whether it is held.

    flock locks belong to the open file: the kernel drops them when the holder exits however it exits, so
    there is no stale lock to detect. A file system without locks (ENOLCK) or a timeout yields False: the
    caller then builds in its private directory without it (correct, only duplicated work).
    """
    with open(path, "a") as handle:
        deadline = time.monotonic() + timeout_s
        announced = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    _logger.warning("%s held for over %.0f s; building without it", path, timeout_s)
                    yield False
                    return
                if not announced:
                    _logger.info("waiting for another process building %s", path.stem)
                    announced = True
                time.sleep(0.2)
            except OSError as error:
                if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                yield False
                return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Library:
    spec: LibrarySpec
    path: Path
    built: bool  # False: taken from the cache or the prebuilt directory


def _compile_and_load(spec: LibrarySpec, build_directory: Path) -> Path:
    """Build `spec` in `build_directory` with torch's cpp_extension (which also loads it); the built file."""
    cpp_extension = _cpp_extension()
    built = cpp_extension.load(
        name=spec.name,
        sources=[str(path) for path in spec.sources],
        extra_include_paths=[str(_CSRC)],
        extra_cflags=_cflags(),
        extra_cuda_cflags=_CUDA_CFLAGS,
        with_cuda=spec.kind == "cuda",
        is_python_module=False,
        build_directory=str(build_directory),
        verbose=os.environ.get("ASR_PLUGIN_VERBOSE_BUILD") == "1",
    )
    return Path(built)


def _load_from(spec: LibrarySpec, directory: Path) -> Library | None:
    path = directory / spec.filename
    if not path.is_file():
        return None
    torch.ops.load_library(str(path))
    return Library(spec, path, built=False)


def _build_into(spec: LibrarySpec, directory: Path) -> Library:
    """Load the library of `spec` from `directory`, building it there (atomically) first when missing."""
    directory.mkdir(parents=True, exist_ok=True)
    existing = _load_from(spec, directory)
    if existing is not None:
        return existing
    if spec.kind == "cuda":
        prepare_cuda_toolkit()
    else:
        check_host_compiler()
    with _build_lock(directory / f"{spec.name}.lock", LOCK_TIMEOUT_S) as locked:
        existing = _load_from(spec, directory)  # built by the process we waited for
        if existing is not None:
            return existing
        if locked:
            _remove_dead_builds(directory)
        private = Path(tempfile.mkdtemp(prefix=f"{_BUILD_PREFIX}{socket.gethostname()}-{os.getpid()}-", dir=directory))
        try:
            built = _compile_and_load(spec, private)  # loaded from here: the mapping outlives the rename
            final = directory / spec.filename
            os.replace(built, final)
        finally:
            shutil.rmtree(private, ignore_errors=True)
    return Library(spec, final, built=True)


def _load_one(kind: str, directory: Path | None) -> Library:
    spec = library_spec(kind)
    prebuilt = os.environ.get(PREBUILT_ENV)
    if directory is None and prebuilt:
        path = prebuilt_path(spec, Path(prebuilt).expanduser())
        torch.ops.load_library(str(path))
        return Library(spec, path, built=False)
    return _build_into(spec, directory if directory is not None else cache_dir())


def load_libraries(kind: str = "cpu", directory: Path | None = None) -> list[Library]:
    """Load the libraries that `kind` needs ("cpu": the CPU library; "cuda": it and the CUDA library, which
    registers kernels for the schemas the CPU one defines), building them if needed; see the module docstring
    for where they come from. `directory` replaces the cache (the ahead-of-time build's ``--out``). A library
    already loaded in this process is returned as it was loaded."""
    if kind not in KINDS:
        raise ValueError(f"library kind must be one of {KINDS}, got {kind!r}")
    with _lock:
        for needed in KINDS[: KINDS.index(kind) + 1]:
            if needed not in _loaded:
                _loaded[needed] = _load_one(needed, directory)
        _fake.register()
        return [_loaded[needed] for needed in KINDS[: KINDS.index(kind) + 1]]


def ops_for(device: torch.device, backend: str = "auto"):
    """The transducer ops for tensors on ``device`` computed by ``backend`` (``backends.resolve_backend``): the
    Triton ops module, or ``torch.ops.asr_plugin`` with the C++ kernels for ``device`` built and loaded. Both
    have the same op names and signatures."""
    if resolve_backend(device, backend) == "triton":
        from .triton import ops

        return ops
    if device.type not in _loaded:
        load_libraries(device.type)
    return torch.ops.asr_plugin
