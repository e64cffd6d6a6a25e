"""CUDA kernels: the sources compile here (nvcc, no GPU needed); values/gradients match the CPU on a GPU."""

import shutil
from pathlib import Path

import pytest
import torch

from asr_plugin.losses import RNNT, samplewise_transducer_loss, transducer_loss
from asr_plugin.losses.extension import load_libraries

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
has_nvcc = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()


@pytest.mark.slow
@pytest.mark.skipif(not has_nvcc, reason="nvcc not found (install the CUDA toolkit to check the CUDA sources compile)")
def test_cuda_sources_compile():
    load_libraries("cuda")
    assert hasattr(torch.ops.asr_plugin, "transducer_logits_grad")


def on_cuda(problem, dtype):
    logits = problem.logits.detach().to("cuda", dtype).requires_grad_()
    return logits, problem.targets.cuda(), problem.logit_lengths.cuda(), problem.target_lengths.cuda()


@pytest.mark.cuda
@needs_gpu
# float32: the CUDA kernels sum in another order than the CPU ones (H200, 2026-11-30: one gradient of 182,000
# off by 1.5e-5), so 5e-5
@pytest.mark.parametrize(
    "dtype, tolerance", [(torch.float32, 5e-5), (torch.float64, 1e-10), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)]
)
@pytest.mark.parametrize(
    "lattice", [RNNT(), RNNT(clamp=0.1), RNNT(fastemit_lambda=0.01)], ids=["plain", "clamp", "fastemit"]
)
def test_batched_cuda_matches_cpu(make_problem, dtype, tolerance, lattice):
    problem = make_problem(batch=5, frames=40, labels=12, vocab=70, blank=3, seed=41)
    upstream = torch.linspace(0.5, 2.0, 5, dtype=torch.float64)
    cpu_logits = problem.logits.detach().to(dtype).requires_grad_()
    expected = transducer_loss(cpu_logits, *problem.args()[1:], lattice, blank=3, reduction="none")
    (expected_grad,) = torch.autograd.grad(expected, cpu_logits, upstream.to(expected.dtype))
    logits, *sequences = on_cuda(problem, dtype)
    loss = transducer_loss(logits, *sequences, lattice, blank=3, reduction="none")
    (grad,) = torch.autograd.grad(loss, logits, upstream.to("cuda", loss.dtype))
    torch.testing.assert_close(loss.cpu(), expected.detach(), rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(grad.cpu().double(), expected_grad.double(), rtol=tolerance, atol=tolerance)


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("memory_budget", [None, "64KiB", "1KiB"])
def test_samplewise_cuda_matches_batched(make_joint_problem, reduction, memory_budget):
    problem = make_joint_problem(batch=6, frames=30, labels=8, vocab=40, hidden=16, seed=42)
    joint = problem.joint.cuda()
    enc = problem.encoder_out.detach().cuda().requires_grad_()
    pred = problem.predictor_out.detach().cuda().requires_grad_()
    lattice = [t.cuda() for t in problem.lattice()]
    upstream = torch.linspace(0.5, 2.0, 6, device="cuda") if reduction == "none" else torch.tensor(1.0, device="cuda")
    inputs = [enc, pred, *joint.parameters()]
    batched = transducer_loss(joint(enc, pred), *lattice, reduction=reduction)
    expected = torch.autograd.grad(batched, inputs, upstream)
    loss = samplewise_transducer_loss(enc, pred, joint, *lattice, reduction=reduction, memory_budget=memory_budget)
    ours = torch.autograd.grad(loss, inputs, upstream)
    torch.testing.assert_close(loss, batched.detach(), rtol=1e-5, atol=1e-5)
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=5e-5)  # float32 sums in other orders


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("autocast", [False, True])
def test_fused_standard_joint_cuda_matches_batched(autocast):
    from asr_plugin.models import Joint

    torch.manual_seed(44)
    joint = Joint(16, 12, 24, 40).cuda()
    enc = torch.randn(6, 30, 16, device="cuda", requires_grad=True)
    pred = torch.randn(6, 9, 12, device="cuda", requires_grad=True)
    targets = torch.randint(1, 40, (6, 8), device="cuda")
    lengths = (torch.randint(10, 31, (6,), device="cuda"), torch.randint(0, 9, (6,), device="cuda"))
    inputs = [enc, pred, *joint.parameters()]
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        expected = torch.autograd.grad(transducer_loss(joint(enc, pred), targets, *lengths), inputs)
        loss = samplewise_transducer_loss(enc, pred, joint, targets, *lengths, memory_budget="64KiB")
    tolerance = 2e-2 if autocast else 1e-4
    for got, want in zip(torch.autograd.grad(loss, inputs), expected):
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.cuda
@needs_gpu
def test_samplewise_host_syncs_do_not_grow_with_the_batch(make_joint_problem):
    """torch.cuda's sync debug mode warns on every synchronising call; one sample per group at both sizes."""
    import warnings

    counts = []
    for batch in (4, 16):
        problem = make_joint_problem(batch=batch, frames=30, labels=8, vocab=40, hidden=16, seed=45)
        joint = problem.joint.cuda()
        enc = problem.encoder_out.detach().cuda().requires_grad_()
        pred = problem.predictor_out.detach().cuda().requires_grad_()
        lattice = [t.cuda() for t in problem.lattice()]

        def step():
            samplewise_transducer_loss(enc, pred, joint, *lattice, max_samples_per_group=1).backward()

        step()  # extension load, allocator warm-up
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                step()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        counts.append(sum("synchroniz" in str(warning.message) for warning in caught))
    # a per-group sync would add 12 from B=4 to B=16; one-off syncs (allocator, first launches) vary by one
    assert max(counts) <= 10 and abs(counts[1] - counts[0]) <= 2, counts


@pytest.mark.cuda
@needs_gpu
def test_non_finite_flag_on_cuda(make_joint_problem):
    problem = make_joint_problem(batch=4, seed=46)
    enc = problem.encoder_out.detach().cuda()
    enc[2, 0, 0] = float("nan")
    lattice = [t.cuda() for t in problem.lattice()]
    with pytest.raises(ValueError, match="logits of sample 2 are not finite"):
        samplewise_transducer_loss(enc, problem.predictor_out.detach().cuda(), problem.joint.cuda(), *lattice)
