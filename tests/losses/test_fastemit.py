"""FastEmit (``RNNT(fastemit_lambda=...)``): values and gradients against the float64 reference of NeMo's numba
definition, in both loss modes, with clamping, padding and per-sample upstream weights."""

import pytest
import torch
from fastemit_reference import fastemit_reference

from asr_plugin.losses import RNNT, TransducerLoss, transducer_loss


@pytest.mark.parametrize("fastemit_lambda", [0.0, 0.001, 0.5])
@pytest.mark.parametrize("clamp", [None, 0.05])
def test_batched_matches_the_float64_reference(make_problem, fastemit_lambda, clamp):
    problem = make_problem(batch=4, frames=7, labels=4, vocab=6, blank=2, dtype=torch.float64, seed=61)
    upstream = torch.linspace(0.5, 2.0, 4, dtype=torch.float64)
    lattice = RNNT(clamp=clamp, fastemit_lambda=fastemit_lambda)
    values = transducer_loss(*problem.args(), lattice, blank=2, reduction="none")
    (grad,) = torch.autograd.grad(values, problem.logits, upstream)
    expected_values, expected_grad = fastemit_reference(*problem.args(), 2, fastemit_lambda, clamp)
    torch.testing.assert_close(values, expected_values, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(grad, expected_grad * upstream.view(-1, 1, 1, 1), rtol=1e-10, atol=1e-10)


def test_the_value_is_scaled_and_only_label_gradients_change(make_problem, reference):
    """NeMo's definition: value (1 + lambda) * nll; the gradient differs from the plain one's (it is not the
    gradient of the scaled value)."""
    problem = make_problem(batch=3, frames=6, labels=3, vocab=5, dtype=torch.float64, seed=62)
    plain = transducer_loss(*problem.args(), reduction="none")
    fastemit = transducer_loss(*problem.args(), RNNT(fastemit_lambda=0.25), reduction="none")
    torch.testing.assert_close(fastemit, 1.25 * reference(*problem.args(), 0), rtol=1e-10, atol=1e-10)
    (plain_grad,) = torch.autograd.grad(plain.sum(), problem.logits)
    (fastemit_grad,) = torch.autograd.grad(fastemit.sum(), problem.logits)
    assert not torch.allclose(fastemit_grad, 1.25 * plain_grad) and not torch.allclose(fastemit_grad, plain_grad)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("budget", ["1KiB", "1MiB"], ids=["t-chunks", "whole"])
def test_samplewise_matches_batched(make_joint_problem, reduction, budget):
    problem = make_joint_problem(batch=5, frames=12, labels=4, vocab=7, dtype=torch.float64, seed=63)
    inputs = [problem.encoder_out, problem.predictor_out, *problem.joint.parameters()]
    lattice = RNNT(clamp=0.2, fastemit_lambda=0.01)
    results = []
    for mode in ("batched", "samplewise"):
        loss = TransducerLoss(mode, lattice, reduction=reduction, memory_budget=budget)
        values = loss(problem.encoder_out, problem.predictor_out, problem.joint, *problem.lattice())
        upstream = torch.linspace(0.5, 2.0, values.numel(), dtype=values.dtype).view(values.shape)
        results.append((values.detach(), *torch.autograd.grad(values, inputs, upstream)))
    for ours, expected in zip(*reversed(results)):
        torch.testing.assert_close(ours, expected, rtol=1e-9, atol=1e-10)


def test_float32_matches_float64(make_problem):
    problem = make_problem(batch=3, frames=9, labels=5, vocab=11, seed=64)
    lattice = RNNT(fastemit_lambda=0.01)
    single = problem.logits.detach().float().requires_grad_()
    values = transducer_loss(single, *problem.args()[1:], lattice, reduction="sum")
    (grad,) = torch.autograd.grad(values, single)
    expected_values, expected_grad = fastemit_reference(*problem.args(), 0, 0.01)
    torch.testing.assert_close(values.double(), expected_values.sum(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.double(), expected_grad, rtol=1e-4, atol=1e-5)
