"""TransducerLoss(lattice=TDT(durations, sigma)) against NeMo's own TDT losses, per sample, in both loss modes.

On the CPU NeMo has only ``TDTLossPytorch`` (its pure-PyTorch reference, "slow and for debugging purposes
only"; it hard-codes ``.cuda()``, patched to a no-op here, in the test only); its numba ``TDTLossNumba`` is
CUDA-only ("TDT is not yet implemented for non CUDA computation") and is compared on a GPU."""

from __future__ import annotations

from unittest import mock

import pytest
import torch

from asr_plugin.losses import TDT, TransducerLoss
from asr_plugin.models import Joint

pytestmark = pytest.mark.nemo
rnnt_pytorch = pytest.importorskip("nemo.collections.asr.losses.rnnt_pytorch")

DURATIONS = [0, 1, 2, 3, 4]


def make_case(device="cpu", batch=4, frames=8, labels=4, vocab=7, hidden=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    joint = Joint(hidden, hidden, hidden, vocab, num_extra_outputs=len(DURATIONS)).to(device)
    encoder_out = torch.randn(batch, frames, hidden, generator=generator).to(device).requires_grad_()
    predictor_out = torch.randn(batch, labels + 1, hidden, generator=generator).to(device).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), generator=generator)
    logit_lengths = torch.randint(2, frames + 1, (batch,), generator=generator)
    target_lengths = torch.randint(0, labels + 1, (batch,), generator=generator)
    logit_lengths[0], target_lengths[0] = frames, labels
    lattice = tuple(t.to(device) for t in (targets, logit_lengths, target_lengths))
    return joint, encoder_out, predictor_out, lattice


def losses_and_grads(loss_fn, inputs):
    """Per-sample losses and the gradients of their weighted sum (non-uniform weights)."""
    losses = loss_fn()
    weights = torch.linspace(0.5, 2.0, losses.shape[0], device=losses.device)
    return losses.detach(), torch.autograd.grad((losses * weights).sum(), inputs)


def assert_close_relative(ours, theirs, rtol=1e-4):
    torch.testing.assert_close(ours[0], theirs[0], rtol=rtol, atol=0)
    for got, want in zip(ours[1], theirs[1]):
        torch.testing.assert_close(got, want, rtol=rtol, atol=rtol * float(want.abs().max()))


@pytest.mark.parametrize("mode", ["batched", "samplewise"])
@pytest.mark.parametrize("sigma", [0.0, 0.05])
def test_matches_nemo_tdt_pytorch_per_sample(mode, sigma):
    joint, encoder_out, predictor_out, lattice = make_case(seed=1)
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    nemo_loss = rnnt_pytorch.TDTLossPytorch(blank=0, durations=DURATIONS, reduction="none", sigma=sigma)

    def theirs():
        acts = joint(encoder_out, predictor_out)  # (B, T, U+1, V + D)
        with mock.patch.object(torch.Tensor, "cuda", lambda self, *args, **kwargs: self):
            return nemo_loss(acts=acts, labels=lattice[0], act_lens=lattice[1], label_lens=lattice[2])

    ours = TransducerLoss(mode, reduction="none", lattice=TDT(DURATIONS, sigma), memory_budget="8KiB")
    expected = losses_and_grads(theirs, inputs)
    got = losses_and_grads(lambda: ours(encoder_out, predictor_out, joint, *lattice), inputs)
    assert_close_relative(got, expected)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (NeMo's numba TDT loss is CUDA-only)")
@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_matches_nemo_tdt_numba_on_cuda(mode):
    numba_loss = pytest.importorskip("nemo.collections.asr.parts.numba.rnnt_loss.rnnt_pytorch")
    joint, encoder_out, predictor_out, lattice = make_case(
        "cuda", batch=6, frames=30, labels=8, vocab=40, hidden=16, seed=2
    )
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    nemo_loss = numba_loss.TDTLossNumba(blank=0, durations=DURATIONS, reduction="none", sigma=0.05)

    def theirs():
        return nemo_loss(joint(encoder_out, predictor_out), *lattice)

    ours = TransducerLoss(mode, reduction="none", lattice=TDT(DURATIONS, 0.05), memory_budget="64KiB")
    expected = losses_and_grads(theirs, inputs)
    got = losses_and_grads(lambda: ours(encoder_out, predictor_out, joint, *lattice), inputs)
    assert_close_relative(got, expected)
