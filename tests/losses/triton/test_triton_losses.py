"""The losses with backend="triton": values and gradients against the float64 references (RNN-T:
conftest.reference_nll, TDT: tdt_reference.py) and against backend="cpp", both modes, every logits dtype."""

from __future__ import annotations

import pytest
import torch
from loss_lattices import make_tdt_problem
from tdt_reference import tdt_reference_nll

from asr_plugin.losses import (
    RNNT,
    TDT,
    TransducerLoss,
    plan_samplewise,
    samplewise_transducer_loss,
    transducer_loss,
)
from asr_plugin.models import Joint

DURATIONS = [0, 1, 2, 3]


def lattice_of(durations, sigma=0.0, clamp=None):
    """RNN-T (durations None) or TDT with `sigma`, both with `clamp`."""
    return RNNT(clamp=clamp) if durations is None else TDT(durations, sigma, clamp)


def values_and_grads(loss_fn, inputs, upstream):
    loss = loss_fn()
    return [loss.detach(), *torch.autograd.grad(loss, inputs, upstream)]


def assert_all_close(ours, expected, **tolerance):
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a.double(), b.double(), **tolerance)


@pytest.mark.parametrize("shape", [(3, 6, 3, 6), (2, 1, 2, 4), (2, 4, 0, 5)])  # (B, T, U, V); T = 1; U = 0
def test_batched_rnnt_matches_float64_reference(make_problem, reference, shape):
    batch, frames, labels, vocab = shape
    problem = make_problem(batch, frames, labels, vocab, dtype=torch.float64, seed=sum(shape))
    upstream = torch.rand(batch, dtype=torch.float64) + 0.5
    ours = values_and_grads(
        lambda: transducer_loss(*problem.args(), reduction="none", backend="triton"), [problem.logits], upstream
    )
    expected = values_and_grads(lambda: reference(*problem.args(), 0), [problem.logits], upstream)
    assert_all_close(ours, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("durations, sigma", [([0, 1], 0.0), ([0, 1, 2, 4], 0.05)])
def test_batched_tdt_matches_float64_reference(durations, sigma):
    logits, *lattice = make_tdt_problem(3, 7, 3, 5, durations, seed=len(durations))
    upstream = torch.rand(3, dtype=torch.float64) + 0.5
    ours = values_and_grads(
        lambda: transducer_loss(logits, *lattice, reduction="none", lattice=TDT(durations, sigma), backend="triton"),
        [logits],
        upstream,
    )
    expected = values_and_grads(lambda: tdt_reference_nll(logits, *lattice, 0, durations, sigma), [logits], upstream)
    assert_all_close(ours, expected, rtol=1e-7, atol=1e-8)  # sigma: a float32 constant under the interpreter


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("durations", [None, DURATIONS])
def test_batched_matches_cpp_in_every_logits_dtype(dtype, durations):
    extra = len(durations or ())
    logits, *lattice = make_tdt_problem(3, 5, 3, 6, durations or [0, 1], seed=2)
    logits = logits.detach()[..., : 6 + extra].to(dtype).requires_grad_()
    options = dict(reduction="sum", lattice=lattice_of(durations, sigma=0.02, clamp=0.5))
    ours = values_and_grads(lambda: transducer_loss(logits, *lattice, **options, backend="triton"), [logits], None)
    expected = values_and_grads(lambda: transducer_loss(logits, *lattice, **options, backend="cpp"), [logits], None)
    tolerance = dict(rtol=2e-5, atol=2e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=2e-3)
    assert_all_close(ours, expected, **tolerance)


def make_joint_case(durations, dtype=torch.float32, batch=4, frames=7, labels=3, vocab=6, hidden=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    joint = Joint(hidden, hidden + 1, hidden + 2, vocab, num_extra_outputs=len(durations or ())).to(dtype)
    encoder_out = torch.randn(batch, frames, hidden, generator=generator, dtype=dtype).requires_grad_()
    predictor_out = torch.randn(batch, labels + 1, hidden + 1, generator=generator, dtype=dtype).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), generator=generator)
    logit_lengths = torch.randint(1, frames + 1, (batch,), generator=generator)
    target_lengths = torch.randint(0, labels + 1, (batch,), generator=generator)
    logit_lengths[0], target_lengths[0], target_lengths[-1] = frames, labels, 0
    return joint, encoder_out, predictor_out, (targets, logit_lengths, target_lengths)


@pytest.mark.parametrize("durations", [None, DURATIONS])
def test_samplewise_in_t_chunks_matches_cpp_and_batched(durations):
    """Groups and T-chunks (a budget of ~6 lattice cells) over the Triton ops: the C++ backend's values and every
    gradient, and the batched float64 losses."""
    joint, encoder_out, predictor_out, lattice = make_joint_case(durations, dtype=torch.float64)
    options = dict(lattice=lattice_of(durations, sigma=0.03))
    cell = plan_samplewise(encoder_out, predictor_out, joint, *lattice, **options).bytes_per_cell.total
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    upstream = torch.linspace(0.5, 1.5, 4, dtype=torch.float64)

    def samplewise(backend):
        return lambda: samplewise_transducer_loss(
            encoder_out,
            predictor_out,
            joint,
            *lattice,
            reduction="none",
            memory_budget=6 * cell,
            **options,
            backend=backend,
        )

    ours = values_and_grads(samplewise("triton"), inputs, upstream)
    assert_all_close(ours, values_and_grads(samplewise("cpp"), inputs, upstream), rtol=1e-7, atol=1e-8)
    batched = lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice, reduction="none", **options)
    assert_all_close(ours, values_and_grads(batched, inputs, upstream), rtol=1e-7, atol=1e-8)


def test_module_passes_the_backend_in_both_modes():
    joint, encoder_out, predictor_out, lattice = make_joint_case(None)
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    for mode in ("batched", "samplewise"):
        loss_fn = TransducerLoss(mode=mode, backend="triton")
        assert "backend='triton'" in repr(loss_fn)
        ours = values_and_grads(lambda: loss_fn(encoder_out, predictor_out, joint, *lattice), inputs, None)
        cpp = TransducerLoss(mode=mode, backend="cpp")
        expected = values_and_grads(lambda: cpp(encoder_out, predictor_out, joint, *lattice), inputs, None)
        assert_all_close(ours, expected, rtol=2e-5, atol=2e-6)
