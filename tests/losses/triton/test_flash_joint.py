"""The flash joint (``losses.flash``): the unfused loss's value and every gradient (inputs, projections,
output layer), and what it declines by name."""

from __future__ import annotations

import pytest
import torch

from asr_plugin.losses import RNNT, transducer_loss
from asr_plugin.losses.flash import flash_transducer_loss
from asr_plugin.models import Joint


def make_case(activation="tanh", batch=3, frames=6, labels=4, vocab=37, hidden=20, seed=0, bias=True, dropout=0.0):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    joint = Joint(hidden - 3, hidden - 1, hidden, vocab, activation=activation, dropout=dropout)
    if not bias:
        joint.output.bias = None
    encoder_out = torch.randn(batch, frames, hidden - 3, generator=generator).requires_grad_()
    predictor_out = torch.randn(batch, labels + 1, hidden - 1, generator=generator).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), generator=generator)
    logit_lengths = torch.tensor([frames, frames - 2, 1][:batch])
    target_lengths = torch.tensor([labels, 0, labels - 1][:batch])
    return joint, encoder_out, predictor_out, (targets, logit_lengths, target_lengths)


def values_and_grads(loss_fn, inputs, upstream):
    loss = loss_fn()
    return [loss.detach(), *torch.autograd.grad(loss, inputs, upstream)]


@pytest.mark.parametrize("activation, bias, clamp", [("tanh", True, None), ("relu", True, 0.05), ("tanh", False, None)])
def test_flash_joint_matches_the_unfused_loss(activation, bias, clamp):
    joint, encoder_out, predictor_out, lattice = make_case(activation, bias=bias)
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    upstream = torch.tensor([0.5, 1.0, 2.0])
    options = dict(reduction="none", lattice=RNNT(clamp=clamp))
    ours = values_and_grads(
        lambda: flash_transducer_loss(encoder_out, predictor_out, joint, *lattice, **options), inputs, upstream
    )
    expected = values_and_grads(
        lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice, **options, backend="cpp"), inputs, upstream
    )
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "change, reason",
    [(dict(dropout=0.1), "joint dropout"), (dict(activation="gelu"), "activation 'gelu'")],
)
def test_flash_joint_declines_by_name(change, reason):
    joint, encoder_out, predictor_out, lattice = make_case(**change)
    with pytest.raises(ValueError, match=reason):
        flash_transducer_loss(encoder_out, predictor_out, joint, *lattice)


def test_flash_joint_in_several_tiles_matches_the_unfused_loss():
    """V over three BLOCK_V tiles, H over two BLOCK_K slices, U + 1 over two BLOCK_U blocks."""
    joint, encoder_out, predictor_out, lattice = make_case(batch=2, frames=3, labels=34, vocab=150, hidden=70, seed=3)
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    ours = values_and_grads(lambda: flash_transducer_loss(encoder_out, predictor_out, joint, *lattice), inputs, None)
    expected = values_and_grads(
        lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice, backend="cpp"), inputs, None
    )
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
