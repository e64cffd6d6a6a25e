"""``RNNT(fastemit_lambda=...)`` against NeMo's own numba RNN-T loss with the same ``fastemit_lambda`` on the CPU
(``RNNTLossNumba``, the loss of NeMo's default ``warprnnt_numba``), per sample, values and gradients, in both
loss modes; and NeMo's numpy reference of its tests (``rnnt_numpy``) against our float64 reference."""

from __future__ import annotations

import pytest
import torch
from fastemit_reference import fastemit_reference

from asr_plugin.losses import RNNT, TransducerLoss
from asr_plugin.models import Joint

pytestmark = pytest.mark.nemo
numba_loss = pytest.importorskip("nemo.collections.asr.parts.numba.rnnt_loss.rnnt_pytorch")


def make_case(batch=5, frames=9, labels=4, vocab=7, hidden=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    joint = Joint(hidden, hidden, hidden, vocab)
    encoder_out = torch.randn(batch, frames, hidden, generator=generator).requires_grad_()
    predictor_out = torch.randn(batch, labels + 1, hidden, generator=generator).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), generator=generator)
    logit_lengths = torch.randint(2, frames + 1, (batch,), generator=generator)
    target_lengths = torch.randint(0, labels + 1, (batch,), generator=generator)
    logit_lengths[0], target_lengths[0] = frames, labels
    return joint, encoder_out, predictor_out, (targets, logit_lengths, target_lengths)


def losses_and_grads(loss_fn, inputs):
    """Per-sample losses and the gradients of their weighted sum (non-uniform weights)."""
    losses = loss_fn()
    weights = torch.linspace(0.5, 2.0, losses.shape[0])
    return losses.detach(), torch.autograd.grad((losses * weights).sum(), inputs)


@pytest.mark.parametrize("mode", ["batched", "samplewise"])
@pytest.mark.parametrize("fastemit_lambda", [0.001, 0.01, 0.1])
def test_matches_nemo_numba_per_sample(mode, fastemit_lambda):
    joint, encoder_out, predictor_out, lattice = make_case(seed=int(fastemit_lambda * 1000))
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    nemo_loss = numba_loss.RNNTLossNumba(blank=0, reduction="none", fastemit_lambda=fastemit_lambda)
    expected = losses_and_grads(lambda: nemo_loss(joint(encoder_out, predictor_out), *lattice), inputs)
    ours = TransducerLoss(mode, RNNT(fastemit_lambda=fastemit_lambda), reduction="none", memory_budget="8KiB")
    got = losses_and_grads(lambda: ours(encoder_out, predictor_out, joint, *lattice), inputs)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=0)
    for ours_grad, nemo_grad in zip(got[1], expected[1]):
        torch.testing.assert_close(ours_grad, nemo_grad, rtol=1e-5, atol=1e-5 * float(nemo_grad.abs().max()))


def test_nemo_numpy_reference_is_ours():
    """NeMo's tests check its FastEmit against ``rnnt_numpy``: the same values and log-prob gradients as our
    float64 reference (which takes them through the log-softmax), to the float32 its alphas and betas are kept in."""
    rnnt_numpy = pytest.importorskip("nemo.collections.asr.parts.numba.rnnt_loss.rnnt_numpy")
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 6, 4, 5, generator=generator, dtype=torch.float64)
    targets = torch.tensor([[1, 2, 3], [4, 1, 2]])
    frames, labels = torch.tensor([6, 4]), torch.tensor([3, 2])
    log_probs = logits.log_softmax(-1)
    costs, lp_grads = rnnt_numpy.transduce_batch(
        log_probs.numpy(), targets.numpy(), frames.numpy(), labels.numpy(), blank=0, fastemit_lambda=0.01
    )
    values, grad = fastemit_reference(logits, targets, frames, labels, 0, 0.01)
    torch.testing.assert_close(values, torch.tensor([float(c) for c in costs], dtype=torch.float64), rtol=1e-6, atol=0)
    lp_grads = torch.from_numpy(lp_grads)
    through_softmax = lp_grads - log_probs.exp() * lp_grads.sum(-1, keepdim=True)  # the log-softmax's backward
    torch.testing.assert_close(grad, through_softmax, rtol=1e-6, atol=1e-6)
