"""CUDA TDT kernels on a GPU (they compile here with the CUDA library, test_transducer_cuda.py): the same values
and gradients as the CPU kernels, which the float64 reference checks (test_tdt_batched.py), and sample-wise on
CUDA equal to batched on CUDA, as the CPU tests do."""

import pytest
import torch
from loss_joints import TanhJoint
from loss_lattices import make_tdt_problem

from asr_plugin.losses import TDT, samplewise_transducer_loss, transducer_loss
from asr_plugin.models import Joint

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize(
    "durations, sigma, blank",
    [([0, 1], 0.0, 0), ([0, 1, 2, 3, 4], 0.05, 0), ([0, 1, 3, 7], 0.02, 3), (list(range(32)), 0.0, 0)],
)
# float32: the CUDA kernels sum in another order than the CPU ones (as for RNN-T, 5e-5)
@pytest.mark.parametrize(
    "dtype, tolerance", [(torch.float32, 5e-5), (torch.float64, 1e-10), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)]
)
@pytest.mark.parametrize("clamp", [None, 0.1])
def test_batched_cuda_matches_cpu(durations, sigma, blank, dtype, tolerance, clamp):
    logits, *lattice = make_tdt_problem(5, 40, 12, 70, durations, blank=blank, dtype=torch.float64, seed=51)
    upstream = torch.linspace(0.5, 2.0, 5, dtype=torch.float64)
    options = dict(blank=blank, reduction="none", lattice=TDT(durations, sigma, clamp=clamp))
    cpu_logits = logits.detach().to(dtype).requires_grad_()
    expected = transducer_loss(cpu_logits, *lattice, **options)
    (expected_grad,) = torch.autograd.grad(expected, cpu_logits, upstream.to(expected.dtype))
    cuda_logits = logits.detach().to("cuda", dtype).requires_grad_()
    loss = transducer_loss(cuda_logits, *(t.cuda() for t in lattice), **options)
    (grad,) = torch.autograd.grad(loss, cuda_logits, upstream.to("cuda", loss.dtype))
    torch.testing.assert_close(loss.cpu(), expected.detach(), rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(grad.cpu().double(), expected_grad.double(), rtol=tolerance, atol=tolerance)


def test_omega_rnnt_branch_on_cuda():
    """omega = 1: the RNN-T ops over the token scores of a TDT joint's output; the duration scores get zero."""
    durations, vocab = [0, 1, 2, 3, 4], 30
    logits, *lattice = make_tdt_problem(4, 20, 6, vocab, durations, dtype=torch.float32, seed=52)
    cuda_logits = logits.detach().cuda().requires_grad_()
    lattice = [t.cuda() for t in lattice]
    loss = transducer_loss(cuda_logits, *lattice, reduction="sum", lattice=TDT(durations), omega=1.0)
    (grad,) = torch.autograd.grad(loss, cuda_logits)
    expected = transducer_loss(cuda_logits[..., :vocab], *lattice, reduction="sum")
    (expected_grad,) = torch.autograd.grad(expected, cuda_logits)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(grad, expected_grad)
    assert (grad[..., vocab:] == 0).all()


@pytest.mark.parametrize("joint_kind", ["fused", "graph"])
@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("memory_budget", [None, "64KiB", "1KiB"])
def test_samplewise_cuda_matches_batched(joint_kind, reduction, memory_budget):
    torch.manual_seed(53)
    durations, vocab = (0, 1, 2, 3, 4), 40
    if joint_kind == "fused":
        joint = Joint(16, 12, 24, vocab, num_extra_outputs=5).cuda()
    else:
        joint = TanhJoint(16, 12, 24, vocab, num_extra_outputs=5).cuda()
    enc = torch.randn(6, 30, 16, device="cuda", requires_grad=True)
    pred = torch.randn(6, 9, 12, device="cuda", requires_grad=True)
    targets = torch.randint(1, vocab, (6, 8), device="cuda")
    lengths = (torch.randint(10, 31, (6,), device="cuda"), torch.randint(0, 9, (6,), device="cuda"))
    inputs = [enc, pred, *joint.parameters()]
    upstream = torch.linspace(0.5, 2.0, 6, device="cuda") if reduction == "none" else torch.tensor(1.0, device="cuda")
    options = dict(reduction=reduction, lattice=TDT(durations, 0.05))
    batched = transducer_loss(joint(enc, pred), targets, *lengths, **options)
    expected = torch.autograd.grad(batched, inputs, upstream)
    loss = samplewise_transducer_loss(enc, pred, joint, targets, *lengths, memory_budget=memory_budget, **options)
    ours = torch.autograd.grad(loss, inputs, upstream)
    torch.testing.assert_close(loss, batched.detach(), rtol=1e-5, atol=1e-5)
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=5e-5)  # float32 sums in other orders


@pytest.mark.parametrize("column", [3, 40 + 2], ids=["token", "duration"])
def test_non_finite_flag_on_cuda(column):
    logits, *lattice = make_tdt_problem(4, 10, 3, 40, [0, 1, 2, 3, 4], dtype=torch.float32, seed=54, full_lengths=True)
    logits = logits.detach().clone()
    logits[2, 1, 1, column] = float("nan")
    with pytest.raises(ValueError, match="logits of sample 2 are not finite"):
        transducer_loss(logits.cuda(), *(t.cuda() for t in lattice), lattice=TDT([0, 1, 2, 3, 4]))
