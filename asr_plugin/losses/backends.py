"""Which kernels compute a loss: the ``backend`` argument of the loss entry points.

* "cpp": the C++ CPU kernels (``csrc``, built on first use); CPU tensors only;
* "cuda": the CUDA C++ kernels (``csrc/cuda``, need ``nvcc`` to build); CUDA tensors only; kept until a GPU
  run has compared them with the Triton kernels side by side;
* "triton": the Triton kernels (``losses.triton``: no compiler needed); CUDA tensors, or CPU tensors under
  Triton's interpreter (``TRITON_INTERPRET=1`` set before their first import: how the tests run them);
* "auto": "cpp" for CPU tensors, "triton" for CUDA tensors.
"""

from __future__ import annotations

import torch

BACKENDS = ("auto", "cpp", "triton", "cuda")
DEVICE_TYPES = ("cpu", "cuda")


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def resolve_backend(device: torch.device, backend: str = "auto") -> str:
    """The kernels ("cpp", "cuda" or "triton") that `backend` means for tensors on `device`; a backend that
    cannot run there is a ValueError naming both."""
    check_backend(backend)
    if device.type not in DEVICE_TYPES:
        raise TypeError(f"transducer loss: tensors on {device.type!r} are not supported (use cpu or cuda)")
    if backend == "auto":
        return "cpp" if device.type == "cpu" else "triton"
    if backend == "cpp" and device.type != "cpu":
        raise ValueError(
            f"backend='cpp' runs the C++ CPU kernels, but the tensors are on {device}: use backend='triton' or 'auto' "
            "(or 'cuda', the CUDA C++ kernels)"
        )
    if backend == "cuda" and device.type != "cuda":
        raise ValueError(
            f"backend='cuda' runs the CUDA C++ kernels, but the tensors are on {device}: use 'cpp' or 'auto'"
        )
    if backend == "triton" and device.type == "cpu":
        from .triton.ops import interpreting

        if not interpreting():
            raise ValueError(
                "backend='triton' runs on CPU tensors only under Triton's interpreter: set TRITON_INTERPRET=1 before "
                "asr_plugin.losses.triton is first imported, or use backend='cpp' (or 'auto') on the CPU"
            )
    return backend
