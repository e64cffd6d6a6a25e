"""Sample-wise TDT loss: the same values and gradients as the batched TDT loss (itself checked against the float64
reference in test_tdt_batched.py), whatever the grouping, the joint (fused standard joint or autograd graph),
dropout and omega."""

import pytest
import torch
from loss_checks import assert_seeded_loss_gradient
from loss_joints import TanhJoint

from asr_plugin.losses import TDT, TransducerLoss, plan_samplewise, samplewise_transducer_loss, transducer_loss
from asr_plugin.models import Joint

DURATIONS = (0, 1, 2, 3, 4)


def make_case(joint_kind, batch=5, frames=11, labels=4, vocab=8, hidden=6, dtype=torch.float32, seed=0, dropout=0.0):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    extra = len(DURATIONS)
    if joint_kind == "fused":
        joint = Joint(hidden, hidden + 1, hidden + 2, vocab, dropout=dropout, num_extra_outputs=extra)
    else:
        joint = TanhJoint(hidden, hidden + 1, hidden + 2, vocab, num_extra_outputs=extra)
    joint = joint.to(dtype)
    encoder_out = torch.randn(batch, frames, hidden, generator=generator, dtype=dtype).requires_grad_()
    predictor_out = torch.randn(batch, labels + 1, hidden + 1, generator=generator, dtype=dtype).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), generator=generator)
    logit_lengths = torch.randint(1, frames + 1, (batch,), generator=generator)
    target_lengths = torch.randint(0, labels + 1, (batch,), generator=generator)
    logit_lengths[0], target_lengths[0] = frames, labels
    target_lengths[-1] = 0  # a sample with U = 0
    return joint, encoder_out, predictor_out, (targets, logit_lengths, target_lengths)


def loss_and_grads(loss_fn, joint, encoder_out, predictor_out, upstream):
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    loss = loss_fn()
    return [loss.detach(), *torch.autograd.grad(loss, inputs, upstream)]


def budget_for(case, cells, **options):
    """A budget holding `cells` lattice cells of the case's joint (the planner's own bytes per cell)."""
    joint, encoder_out, predictor_out, lattice = case
    one_cell = plan_samplewise(
        encoder_out, predictor_out, joint, *lattice, lattice=TDT(DURATIONS), **options
    ).bytes_per_cell.total
    return cells * one_cell


@pytest.mark.parametrize("joint_kind", ["fused", "graph"])
@pytest.mark.parametrize("grouping", ["single group", "several groups", "T-chunks"])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_matches_batched(joint_kind, grouping, reduction):
    case = make_case(joint_kind, seed=1)
    joint, encoder_out, predictor_out, lattice = case
    budget = {"single group": None, "several groups": budget_for(case, 2 * 11 * 5), "T-chunks": budget_for(case, 9)}[
        grouping
    ]
    plan = plan_samplewise(encoder_out, predictor_out, joint, *lattice, lattice=TDT(DURATIONS), memory_budget=budget)
    chunked = any(len(group.chunks()) > 1 for group in plan.groups)
    if grouping == "single group":
        assert len(plan.groups) == 1
    elif grouping == "several groups":
        assert 1 < len(plan.groups) < 5 and not chunked
    else:
        assert chunked
    upstream = torch.linspace(0.3, 2.0, 5) if reduction == "none" else torch.tensor(1.3)
    options = dict(reduction=reduction, lattice=TDT(DURATIONS, 0.05))
    expected = loss_and_grads(
        lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice, **options),
        joint,
        encoder_out,
        predictor_out,
        upstream,
    )
    ours = loss_and_grads(
        lambda: samplewise_transducer_loss(
            encoder_out, predictor_out, joint, *lattice, memory_budget=budget, **options
        ),
        joint,
        encoder_out,
        predictor_out,
        upstream,
    )
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_float64_with_clamp_matches_batched():
    case = make_case("fused", dtype=torch.float64, seed=2)
    joint, encoder_out, predictor_out, lattice = case
    options = dict(reduction="sum", lattice=TDT(DURATIONS, 0.02, clamp=0.1))
    expected = loss_and_grads(
        lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice, **options),
        joint,
        encoder_out,
        predictor_out,
        torch.tensor(1.0, dtype=torch.float64),
    )
    ours = loss_and_grads(
        lambda: samplewise_transducer_loss(
            encoder_out, predictor_out, joint, *lattice, memory_budget=budget_for(case, 7), **options
        ),
        joint,
        encoder_out,
        predictor_out,
        torch.tensor(1.0, dtype=torch.float64),
    )
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_omega_takes_the_same_branch_in_both_modes(mode):
    """One draw per call, before the first group; seeded, both modes take the same branch (and the draw does not
    change the plan)."""
    joint, encoder_out, predictor_out, lattice = make_case("fused", seed=3)
    rnnt = TransducerLoss(mode, reduction="sum", lattice=TDT(DURATIONS, 0.05), omega=1.0, memory_budget="4KiB")
    tdt = TransducerLoss(mode, reduction="sum", lattice=TDT(DURATIONS, 0.05), memory_budget="4KiB")
    mixed = TransducerLoss(mode, reduction="sum", lattice=TDT(DURATIONS, 0.05), omega=0.5, memory_budget="4KiB")
    args = (encoder_out, predictor_out, joint, *lattice)
    upstream = torch.tensor(1.0)
    branches = {
        True: loss_and_grads(lambda: rnnt(*args), joint, encoder_out, predictor_out, upstream),
        False: loss_and_grads(lambda: tdt(*args), joint, encoder_out, predictor_out, upstream),
    }
    logits = joint(encoder_out, predictor_out)
    torch.testing.assert_close(branches[True][0], transducer_loss(logits[..., :8], *lattice, reduction="sum").detach())
    seen = set()
    for seed in range(8):
        torch.manual_seed(seed)
        takes_rnnt = torch.rand(()).item() < 0.5
        torch.manual_seed(seed)
        got = loss_and_grads(lambda: mixed(*args), joint, encoder_out, predictor_out, upstream)
        for value, want in zip(got, branches[takes_rnnt]):
            torch.testing.assert_close(value, want, rtol=1e-6, atol=1e-6)
        seen.add(takes_rnnt)
    assert seen == {True, False}


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_fused_dropout_gradient_is_that_of_the_seeded_loss(reduction):
    """A TDT joint with dropout, several groups and T-chunks (and for "none" the backward's recomputation): every
    pass sees the first pass's masks, so the gradient matches a finite difference of the loss under one seed."""
    case = make_case("fused", batch=4, dtype=torch.float64, seed=4, dropout=0.3)
    joint, encoder_out, predictor_out, lattice = case
    joint.train()
    budget = budget_for(case, 8)
    options = dict(reduction=reduction, memory_budget=budget, lattice=TDT(DURATIONS, 0.05))
    seeded_loss = assert_seeded_loss_gradient(
        lambda: samplewise_transducer_loss(encoder_out, predictor_out, joint, *lattice, **options),
        joint.output.weight,
        reduction,
    )
    with_dropout = seeded_loss()
    joint.eval()
    assert not torch.allclose(with_dropout, seeded_loss())  # the masks were applied


def test_bf16_autocast_matches_batched():
    joint, encoder_out, predictor_out, lattice = make_case("fused", vocab=16, seed=5)
    options = dict(lattice=TDT(DURATIONS, 0.02))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = loss_and_grads(
            lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice, **options),
            joint,
            encoder_out,
            predictor_out,
            torch.tensor(1.0),
        )
        ours = loss_and_grads(
            lambda: samplewise_transducer_loss(
                encoder_out, predictor_out, joint, *lattice, memory_budget="16KiB", **options
            ),
            joint,
            encoder_out,
            predictor_out,
            torch.tensor(1.0),
        )
    assert ours[0].dtype == torch.float32
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
