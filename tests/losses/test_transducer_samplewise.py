"""Sample-wise transducer loss: same values and gradients as the batched loss, whatever the grouping."""

import pytest
import torch
from loss_checks import assert_gradient_is_the_finite_difference
from torch import nn

from asr_plugin.losses import RNNT, samplewise_transducer_loss, transducer_loss
from asr_plugin.losses.planning import cell_bytes, plan_groups


def losses_and_grads(loss_fn, problem, upstream):
    """Loss and gradients w.r.t. encoder_out, predictor_out and every joint parameter (via .grad, like DDP)."""
    problem.joint.zero_grad(set_to_none=True)
    inputs = (problem.encoder_out, problem.predictor_out)
    loss = loss_fn()
    loss.backward(upstream, inputs=[*inputs, *problem.joint.parameters()])
    grads = [tensor.grad.clone() for tensor in inputs] + [p.grad.clone() for p in problem.joint.parameters()]
    for tensor in inputs:
        tensor.grad = None
    return loss.detach(), grads


def batched(problem, reduction="mean", clamp=None):
    logits = problem.joint(problem.encoder_out, problem.predictor_out)
    return transducer_loss(logits, *problem.lattice(), RNNT(clamp=clamp), blank=problem.blank, reduction=reduction)


def samplewise(problem, reduction="mean", clamp=None, memory_budget=None):
    return samplewise_transducer_loss(
        problem.encoder_out,
        problem.predictor_out,
        problem.joint,
        *problem.lattice(),
        RNNT(clamp=clamp),
        blank=problem.blank,
        reduction=reduction,
        memory_budget=memory_budget,
    )


def upstream_for(reduction, batch):
    if reduction == "none":
        return torch.linspace(0.3, 2.0, batch)  # non-uniform: joint parameter gradients are recomputed
    return torch.tensor(1.3)


def assert_same(ours, expected, rtol=1e-5, atol=1e-5):
    torch.testing.assert_close(ours[0], expected[0], rtol=rtol, atol=atol)
    assert len(ours[1]) == len(expected[1])
    for got, want in zip(ours[1], expected[1]):
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


def budget_for(problem, cells):
    """A memory budget that holds `cells` lattice cells of the problem's joint."""
    vocab = problem.joint.output.out_features
    return (
        cells * cell_bytes(vocab, problem.encoder_out.dtype, problem.joint.hidden_dim, problem.encoder_out.dtype).total
    )


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("grouping", ["single group", "several groups", "T-chunks"])
def test_matches_batched(make_joint_problem, reduction, grouping):
    problem = make_joint_problem(batch=5, frames=9, labels=4, seed=11)
    budget = {
        "single group": None,
        "several groups": budget_for(problem, 2 * 9 * 5),
        "T-chunks": budget_for(problem, 8),
    }[grouping]
    groups = plan_groups(
        tuple(problem.logit_lengths.tolist()),
        tuple(problem.target_lengths.tolist()),
        budget or 2**40,
        budget_for(problem, 1),
    ).groups
    if grouping == "single group":
        assert len(groups) == 1
    elif grouping == "several groups":
        assert 1 < len(groups) < 5 and all(g.chunk == g.frames for g in groups)
    else:
        assert any(len(g.chunks()) > 1 for g in groups)
    upstream = upstream_for(reduction, 5)
    expected = losses_and_grads(lambda: batched(problem, reduction), problem, upstream)
    ours = losses_and_grads(lambda: samplewise(problem, reduction, memory_budget=budget), problem, upstream)
    assert_same(ours, expected)


def test_uniform_none_upstream_and_clamp(make_joint_problem):
    problem = make_joint_problem(batch=4, seed=12)
    upstream = torch.full((4,), 0.7)
    expected = losses_and_grads(lambda: batched(problem, "none", clamp=0.1), problem, upstream)
    ours = losses_and_grads(
        lambda: samplewise(problem, "none", clamp=0.1, memory_budget=budget_for(problem, 60)), problem, upstream
    )
    assert_same(ours, expected)


@pytest.mark.parametrize("budget_cells", [None, 3])
def test_single_sample(make_joint_problem, budget_cells):
    problem = make_joint_problem(batch=1, frames=7, labels=3, seed=13)
    budget = None if budget_cells is None else budget_for(problem, budget_cells)
    expected = losses_and_grads(lambda: batched(problem, "sum"), problem, torch.tensor(1.0))
    ours = losses_and_grads(lambda: samplewise(problem, "sum", memory_budget=budget), problem, torch.tensor(1.0))
    assert_same(ours, expected)


def test_float64_matches_reference(make_joint_problem, reference):
    problem = make_joint_problem(batch=3, frames=5, labels=3, blank=7, dtype=torch.float64, seed=14)
    logits = problem.joint(problem.encoder_out, problem.predictor_out)
    expected = reference(logits, *problem.lattice(), problem.blank)
    ours = samplewise(problem, "none", memory_budget=budget_for(problem, 10))
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)


def test_no_grad_does_no_gradient_work(make_joint_problem):
    problem = make_joint_problem(seed=15)
    expected = batched(problem, "none").detach()
    grad_modes = []

    def joint(encoder_out, predictor_out):
        grad_modes.append(torch.is_grad_enabled())
        return problem.joint(encoder_out, predictor_out)

    with torch.no_grad():
        loss = samplewise_transducer_loss(
            problem.encoder_out, problem.predictor_out, joint, *problem.lattice(), reduction="none"
        )
    assert loss.grad_fn is None and not any(grad_modes)
    torch.testing.assert_close(loss, expected)

    grad_modes.clear()
    problem.joint.requires_grad_(False)
    loss = samplewise_transducer_loss(
        problem.encoder_out.detach(), problem.predictor_out.detach(), joint, *problem.lattice(), reduction="none"
    )
    assert loss.grad_fn is None and not any(grad_modes)
    torch.testing.assert_close(loss, expected)


class SavedOutputJoint(nn.Module):
    """A joint whose last op saves its output for backward: the logits gradient must not overwrite it."""

    def __init__(self, joint):
        super().__init__()
        self.joint = joint

    def forward(self, encoder_out, predictor_out):
        return 3.0 * torch.tanh(self.joint(encoder_out, predictor_out))


def test_joint_that_saves_its_output(make_joint_problem):
    problem = make_joint_problem(seed=16)
    problem.joint = SavedOutputJoint(problem.joint)
    problem.joint.output = problem.joint.joint.output
    problem.joint.hidden_dim = problem.joint.joint.hidden_dim
    problem.joint.num_extra_outputs = 0
    expected = losses_and_grads(lambda: batched(problem, "mean"), problem, torch.tensor(1.0))
    ours = losses_and_grads(
        lambda: samplewise(problem, "mean", memory_budget=budget_for(problem, 90)), problem, torch.tensor(1.0)
    )
    assert_same(ours, expected)


def test_plain_callable_joint(make_joint_problem):
    """A plain callable: gradients reach encoder_out and predictor_out (captured tensors get none)."""
    problem = make_joint_problem(seed=17)
    module = problem.joint

    def joint(encoder_out, predictor_out):
        return module(encoder_out, predictor_out)

    upstream = torch.linspace(0.5, 1.5, 5)
    loss = samplewise_transducer_loss(
        problem.encoder_out, problem.predictor_out, joint, *problem.lattice(), reduction="none"
    )
    ours = torch.autograd.grad(loss, [problem.encoder_out, problem.predictor_out], upstream)
    expected = torch.autograd.grad(batched(problem, "none"), [problem.encoder_out, problem.predictor_out], upstream)
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert all(p.grad is None for p in module.parameters())


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_bf16_autocast(make_joint_problem, reduction):
    """Under autocast the joint returns bf16 logits; the loss accumulates in float32 in both modes."""
    problem = make_joint_problem(batch=4, frames=8, labels=3, vocab=16, seed=18)
    upstream = upstream_for(reduction, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = losses_and_grads(lambda: batched(problem, reduction), problem, upstream)
        ours = losses_and_grads(
            lambda: samplewise(problem, reduction, memory_budget=budget_for(problem, 50)), problem, upstream
        )
    assert ours[0].dtype == torch.float32
    assert_same(ours, expected, rtol=2e-2, atol=2e-2)


def test_plan_groups_sorts_and_bounds():
    frames, labels = (10, 2, 10, 5, 1), (3, 1, 0, 3, 0)
    plan = plan_groups(frames, labels, budget=100, bytes_per_cell=1)
    groups = plan.groups
    assert sorted(b for g in groups for b in g.samples) == [0, 1, 2, 3, 4]
    assert plan.order == tuple(b for g in groups for b in g.samples)
    assert [g.start for g in groups] == [sum(len(h.samples) for h in groups[:i]) for i in range(len(groups))]
    for group in groups:
        assert group.frames == max(frames[b] for b in group.samples)
        assert group.labels_plus_one == max(labels[b] + 1 for b in group.samples)
        assert len(group.samples) * group.chunk * group.labels_plus_one <= 100
    chunked = plan_groups((50,), (4,), budget=100, bytes_per_cell=1).groups
    assert chunked[0].chunk == 20 and chunked[0].chunks() == [
        (0, 10),
        (10, 30),
        (30, 50),
    ]  # the kept last chunk is a full one
    assert chunked[0].recomputed_cells() == 30 * 5 and chunked[0].lattice_cells() == 50 * 5
    assert plan.recomputed_fraction() == 0  # every group fits: nothing recomputed


class DropoutJoint(nn.Module):
    def __init__(self, joint):
        super().__init__()
        self.joint, self.dropout = joint, nn.Dropout(0.3)

    def forward(self, encoder_out, predictor_out):
        return self.joint(self.dropout(encoder_out), predictor_out)


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_recomputation_replays_dropout(make_joint_problem, reduction):
    """With T-chunks (and a recomputed backward for "none"), the gradient is that of the seeded loss: the
    dropout masks of the recomputations match the first pass (directional derivative vs finite difference)."""
    problem = make_joint_problem(batch=3, frames=6, labels=2, dtype=torch.float64, seed=19)
    joint = DropoutJoint(problem.joint).train()
    upstream = (
        torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
        if reduction == "none"
        else torch.tensor(1.0, dtype=torch.float64)
    )
    budget = budget_for(problem, 5)

    def seeded_loss(encoder_out):
        torch.manual_seed(0)
        loss = samplewise_transducer_loss(
            encoder_out, problem.predictor_out, joint, *problem.lattice(), reduction=reduction, memory_budget=budget
        )
        return (loss * upstream).sum()

    assert_gradient_is_the_finite_difference(lambda: seeded_loss(problem.encoder_out), problem.joint.output.weight)


def test_second_backward_with_retained_graph(make_joint_problem):
    """Gradients are scaled in place by the first backward; a retained graph's second backward recomputes."""
    problem = make_joint_problem(batch=4, seed=20)
    upstream = torch.linspace(0.5, 1.5, 4)
    loss = samplewise(problem, "none", memory_budget=budget_for(problem, 60))
    first = torch.autograd.grad(loss, [problem.encoder_out, *problem.joint.parameters()], upstream, retain_graph=True)
    second = torch.autograd.grad(loss, [problem.encoder_out, *problem.joint.parameters()], 2 * upstream)
    for once, twice in zip(first, second):
        torch.testing.assert_close(twice, 2 * once, rtol=1e-5, atol=1e-6)
