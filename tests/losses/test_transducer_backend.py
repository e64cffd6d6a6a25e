"""The loss's `backend` argument: which kernels each value means on each device, and clear errors for a backend
that cannot run there (the Triton kernels themselves: tests/losses/triton, under the interpreter)."""

from __future__ import annotations

import re

import pytest
import torch

from asr_plugin.losses import (
    TransducerLoss,
    samplewise_transducer_loss,
    transducer_loss,
)
from asr_plugin.losses.backends import resolve_backend

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_auto_is_cpp_on_cpu_and_triton_on_cuda():
    assert resolve_backend(CPU, "auto") == "cpp"
    assert resolve_backend(CUDA, "auto") == "triton"
    assert resolve_backend(CUDA, "cuda") == "cuda"
    assert resolve_backend(CUDA, "triton") == "triton"


@pytest.mark.parametrize(
    "device, backend, message",
    [
        (CUDA, "cpp", "backend='cpp' runs the C++ CPU kernels"),
        (CPU, "cuda", "backend='cuda' runs the CUDA C++ kernels"),
        (CPU, "triton", "TRITON_INTERPRET=1"),  # this process defines the kernels without the interpreter
    ],
)
def test_a_backend_that_cannot_run_on_the_device_is_refused(device, backend, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_backend(device, backend)


def test_unknown_backends_are_refused_by_every_entry_point(make_problem, make_joint_problem):
    problem, joint_problem = make_problem(), make_joint_problem()
    with pytest.raises(ValueError, match="backend must be one of"):
        TransducerLoss(backend="numba")
    with pytest.raises(ValueError, match="backend must be one of"):
        transducer_loss(*problem.args(), backend="gpu")
    with pytest.raises(ValueError, match="backend must be one of"):
        samplewise_transducer_loss(
            joint_problem.encoder_out,
            joint_problem.predictor_out,
            joint_problem.joint,
            *joint_problem.lattice(),
            backend="CPP",
        )


def test_cuda_backend_on_cpu_tensors_is_a_clear_error(make_problem):
    with pytest.raises(ValueError, match="tensors are on cpu"):
        transducer_loss(*make_problem().args(), backend="cuda")


def test_cpp_and_auto_agree_on_cpu(make_problem):
    problem = make_problem()
    torch.testing.assert_close(
        transducer_loss(*problem.args(), backend="cpp"),
        transducer_loss(*problem.args(), backend="auto"),
        rtol=0,
        atol=0,
    )
