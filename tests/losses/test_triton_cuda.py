"""The GPU backends on a GPU: Triton (backend="triton", what "auto" means for CUDA tensors) and the CUDA C++
kernels (backend="cuda") against the C++ CPU kernels (themselves checked against the float64 references), both
lattices, both modes, the three logits dtypes, and an input over 2^31 elements (64-bit offsets). The GPU check's
first stage runs the Triton ones (ids ending in triton_kernels) before anything is built."""

from __future__ import annotations

import pytest
import torch
from loss_lattices import make_tdt_problem

from asr_plugin.losses import RNNT, TDT, samplewise_transducer_loss, transducer_loss
from asr_plugin.models import Joint

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
GPU_BACKENDS = pytest.mark.parametrize("backend", ["triton", "cuda"], ids=["triton_kernels", "cuda_cpp_kernels"])
TDT_DURATIONS = [0, 1, 2, 3, 4]
TOLERANCE = {torch.float32: 5e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


@GPU_BACKENDS
@pytest.mark.parametrize("durations", [None, TDT_DURATIONS], ids=["rnnt", "tdt"])
@pytest.mark.parametrize("dtype", list(TOLERANCE))
def test_batched_matches_cpu(backend, durations, dtype):
    logits, *lattice = make_tdt_problem(5, 40, 12, 70, durations or [0, 1], dtype=torch.float64, seed=61)
    logits = logits.detach()[..., : 70 + len(durations or ())]
    upstream = torch.linspace(0.5, 2.0, 5)
    options = dict(reduction="none", lattice=TDT(durations, 0.02, 0.5) if durations else RNNT(clamp=0.5))
    cpu_logits = logits.to(dtype).requires_grad_()
    expected = transducer_loss(cpu_logits, *lattice, **options, backend="cpp")
    (expected_grad,) = torch.autograd.grad(expected, cpu_logits, upstream)
    cuda_logits = logits.to("cuda", dtype).requires_grad_()
    loss = transducer_loss(cuda_logits, *(t.cuda() for t in lattice), **options, backend=backend)
    (grad,) = torch.autograd.grad(loss, cuda_logits, upstream.cuda())
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(loss.cpu(), expected.detach(), rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(grad.cpu().float(), expected_grad.float(), rtol=tolerance, atol=tolerance)


@GPU_BACKENDS
@pytest.mark.parametrize("durations", [None, TDT_DURATIONS], ids=["rnnt", "tdt"])
def test_samplewise_in_t_chunks_matches_cpu(backend, durations):
    generator = torch.Generator().manual_seed(62)
    torch.manual_seed(62)
    joint = Joint(16, 16, 24, 40, num_extra_outputs=len(durations or ()))
    encoder_out = torch.randn(6, 50, 16, generator=generator).requires_grad_()
    predictor_out = torch.randn(6, 11, 16, generator=generator).requires_grad_()
    targets = torch.randint(1, 40, (6, 10), generator=generator)
    lengths = torch.tensor([50, 31, 7, 50, 12, 1]), torch.tensor([10, 4, 0, 9, 10, 3])
    options = dict(lattice=TDT(durations, 0.02) if durations else RNNT(), memory_budget="64KiB")
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    expected = samplewise_transducer_loss(
        encoder_out, predictor_out, joint, targets, *lengths, **options, backend="cpp"
    )
    expected_grads = torch.autograd.grad(expected, inputs)
    cuda_joint = joint.cuda()
    cuda_inputs = [t.detach().cuda().requires_grad_() for t in (encoder_out, predictor_out)]
    loss = samplewise_transducer_loss(
        *cuda_inputs, cuda_joint, targets.cuda(), *(t.cuda() for t in lengths), **options, backend=backend
    )
    grads = torch.autograd.grad(loss, [*cuda_inputs, *cuda_joint.parameters()])
    torch.testing.assert_close(loss.cpu(), expected, rtol=5e-5, atol=5e-5)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad.cpu(), expected_grad, rtol=1e-4, atol=1e-5)


def test_triton_input_over_2_31_elements():
    """bf16 logits of 2.2e9 elements (4.4 GB; 64-bit offsets in every kernel): the batch's per-sample losses and
    a gradient slice equal those of each sample computed alone (1.1e9 elements each)."""
    batch, frames, labels, vocab = 2, 1100, 999, 1000
    assert batch * frames * (labels + 1) * vocab > 2**31
    generator = torch.Generator(device="cuda").manual_seed(63)
    logits = torch.randn(batch, frames, labels + 1, vocab, device="cuda", dtype=torch.bfloat16, generator=generator)
    targets = torch.randint(1, vocab, (batch, labels), device="cuda", generator=generator)
    logit_lengths = torch.tensor([frames, frames - 100], device="cuda")
    target_lengths = torch.tensor([labels, labels - 50], device="cuda")
    logits.requires_grad_()
    loss = transducer_loss(logits, targets, logit_lengths, target_lengths, reduction="none", backend="triton")
    (grad,) = torch.autograd.grad(loss, logits, torch.ones_like(loss))
    last_rows = grad[1, -120:].float().cpu()  # the second sample's end: offsets past 2^31
    del grad
    for n in range(batch):
        alone = logits.detach()[n : n + 1].clone().requires_grad_()
        single = transducer_loss(
            alone,
            targets[n : n + 1],
            logit_lengths[n : n + 1],
            target_lengths[n : n + 1],
            reduction="none",
            backend="triton",
        )
        torch.testing.assert_close(single, loss[n : n + 1].detach(), rtol=1e-5, atol=1e-3)
        if n == 1:
            (single_grad,) = torch.autograd.grad(single, alone)
            torch.testing.assert_close(single_grad[0, -120:].float().cpu(), last_rows, rtol=0, atol=0)


def test_flash_joint_peak_memory_is_far_below_the_logits():
    """At a lattice whose float32 logits would take 2.1 GB, the flash joint's forward and backward allocate less
    than a tenth of that beyond their inputs (five floats per cell, no (T, U+1, V) tensor), with the unfused
    loss's value."""
    from asr_plugin.losses.flash import flash_transducer_loss

    torch.manual_seed(64)
    joint = Joint(256, 256, 256, 1024).cuda()
    encoder_out = torch.randn(4, 400, 256, device="cuda", requires_grad=True)
    predictor_out = torch.randn(4, 321, 256, device="cuda", requires_grad=True)
    targets = torch.randint(1, 1024, (4, 320), device="cuda")
    lengths = torch.full((4,), 400, device="cuda"), torch.full((4,), 320, device="cuda")
    logits_bytes = 4 * 400 * 321 * 1024 * 4
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss = flash_transducer_loss(encoder_out, predictor_out, joint, targets, *lengths)
    loss.backward()
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - baseline < logits_bytes / 10
    expected = transducer_loss(joint(encoder_out, predictor_out), targets, *lengths, backend="triton")
    torch.testing.assert_close(loss.detach(), expected.detach(), rtol=1e-4, atol=1e-4)


def test_samplewise_flash_joint_stays_within_its_plan():
    """The sample-wise loss with the flash joint at a budget that splits the batch: the device memory it allocates
    beyond the inputs and parameters stays within the plan's estimate (``planning.flash_cell_bytes``: 24 bytes a
    cell, the projections per row), and "auto" chooses it for this standard joint on CUDA."""
    from asr_plugin.losses import TransducerLoss

    torch.manual_seed(65)
    joint = Joint(256, 256, 512, 1024).cuda()
    encoder_out = torch.randn(16, 300, 256, device="cuda", requires_grad=True)  # (B, T, H_e)
    predictor_out = torch.randn(16, 61, 256, device="cuda", requires_grad=True)  # (B, U+1, H_p)
    targets = torch.randint(1, 1024, (16, 60), device="cuda")
    lengths = torch.full((16,), 300, device="cuda"), torch.full((16,), 60, device="cuda")
    loss_fn = TransducerLoss("samplewise", memory_budget="32MiB")  # flash_joint="auto"

    def step():
        loss_fn(encoder_out, predictor_out, joint, targets, *lengths).backward()
        for tensor in (encoder_out, predictor_out, *joint.parameters()):
            tensor.grad = None

    step()  # Triton compilation, cuBLAS workspaces
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    plan = loss_fn.last_plan
    assert plan.runner == "flash" and len(plan.groups) > 1, plan.describe()
    assert torch.cuda.max_memory_allocated() - baseline <= plan.estimated_peak_bytes(), plan.describe()
