"""float16 autocast with a real GradScaler: sample-wise gradients agree with batched ones, tiny gradients
included (the fp16 gradient scale, a power of two, keeps them from flushing to zero in the joint's fp16
backward). The scale is state of the loss object: lowered after an overflow, kept for its later calls."""

import pytest
import torch

from asr_plugin.losses import TransducerLoss, samplewise_transducer_loss, transducer_loss
from asr_plugin.losses.engine import FP16_SCALE_START
from asr_plugin.models import Joint


def tiny_gradient_case():
    """A joint whose output weights are 1e-5: its fp16 backward sees gradients near fp16's smallest values."""
    torch.manual_seed(0)
    batch, frames, labels, vocab, hidden = 4, 6, 3, 8, 6
    joint = Joint(hidden, hidden, hidden, vocab)
    with torch.no_grad():
        joint.output.weight.mul_(1e-5)
    encoder_out = torch.randn(batch, frames, hidden, requires_grad=True)
    predictor_out = torch.randn(batch, labels + 1, hidden, requires_grad=True)
    targets = torch.randint(1, vocab, (batch, labels))
    lengths = (torch.full((batch,), frames), torch.full((batch,), labels))
    return joint, encoder_out, predictor_out, (targets, *lengths)


def scaled_step(loss_fn, joint, encoder_out, predictor_out):
    """Loss and unscaled gradients after GradScaler.scale(loss).backward() and unscale_."""
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    optimizer = torch.optim.SGD(inputs, lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn()
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    return loss.detach(), [tensor.grad.clone() for tensor in inputs]


def run_both(joint, encoder_out, predictor_out, lattice, loss=None):
    """(batched, sample-wise) GradScaler steps; sample-wise through `loss` (default: the functional form)."""
    batched = scaled_step(
        lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice), joint, encoder_out, predictor_out
    )
    if loss is None:
        samplewise = lambda: samplewise_transducer_loss(
            encoder_out, predictor_out, joint, *lattice, memory_budget="2KiB"
        )
    else:
        samplewise = lambda: loss(encoder_out, predictor_out, joint, *lattice)
    return batched, scaled_step(samplewise, joint, encoder_out, predictor_out)


def assert_agree(ours, batched):
    torch.testing.assert_close(ours[0], batched[0], rtol=1e-3, atol=1e-3)
    for got, want in zip(ours[1], batched[1]):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * float(want.abs().max()))


def test_fp16_grad_scaler_matches_batched():
    batched, ours = run_both(*tiny_gradient_case())
    assert all((grad != 0).all() for grad in batched[1][:2])  # batched keeps every encoder/predictor gradient
    assert_agree(ours, batched)


def test_without_the_fp16_scale_tiny_gradients_flush():
    """What the fp16 gradient scale is for: with it at 1, part of the encoder gradient underflows to zero."""
    loss = TransducerLoss("samplewise", memory_budget="2KiB")
    loss.samplewise_state.fp16_scale = 1.0
    batched, ours = run_both(*tiny_gradient_case(), loss=loss)
    assert (ours[1][0] == 0).any() and (batched[1][0] != 0).all()


def test_overflow_lowers_the_scale_of_that_loss_only():
    loss, other = TransducerLoss("samplewise", memory_budget="2KiB"), TransducerLoss("samplewise", memory_budget="2KiB")
    loss.samplewise_state.fp16_scale = 2.0**40  # overflows float16 on the first group
    batched, ours = run_both(*tiny_gradient_case(), loss=loss)
    assert loss.samplewise_state.fp16_scale < 2.0**16
    assert_agree(ours, batched)
    kept = loss.samplewise_state.fp16_scale
    run_both(*tiny_gradient_case(), loss=loss)
    assert loss.samplewise_state.fp16_scale == kept  # kept for the next call
    assert other.samplewise_state.fp16_scale == FP16_SCALE_START  # no process-wide state


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_no_fp16_scale_outside_float16(dtype):
    loss = TransducerLoss("samplewise")
    loss.samplewise_state.fp16_scale = 2.0**40  # would overflow if it were applied
    joint, encoder_out, predictor_out, lattice = tiny_gradient_case()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        value = loss(encoder_out, predictor_out, joint, *lattice)
    value.backward()
    assert torch.isfinite(encoder_out.grad).all() and loss.samplewise_state.fp16_scale == 2.0**40
