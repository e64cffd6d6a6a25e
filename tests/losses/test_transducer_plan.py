"""The sample-wise plan: fixed default budget, 2-D sort, max_samples_per_group, the public Plan (returned
before a call, kept after it, logged once per loss object), non-finite flags."""

import logging

import pytest
import torch

from asr_plugin.losses import TDT, TransducerLoss, plan_samplewise, samplewise_transducer_loss, transducer_loss
from asr_plugin.losses.planning import default_budget, plan_groups


def test_default_budget_is_fixed():
    """Not a fraction of free memory: the same on every step and rank (no CUDA call needed to know it)."""
    assert default_budget(torch.device("cpu")) == 256 * 2**20
    assert default_budget(torch.device("cuda", 3)) == 2**30


def padded_cells(plan):
    return sum(len(g.samples) * g.frames * g.labels_plus_one for g in plan.groups)


def test_two_dimensional_sort_groups_alike_samples():
    """Long-T/short-U and short-T/long-U samples have the same lattice size; grouped by size alone they
    would pair up across shapes. The 2-D sort pairs like with like: two groups, no padding."""
    frames, labels = (20, 50, 20, 50), (4, 1, 4, 1)
    plan = plan_groups(frames, labels, budget=200, bytes_per_cell=1)
    assert sorted(sorted(g.samples) for g in plan.groups) == [[0, 2], [1, 3]]
    assert padded_cells(plan) == sum(t * (u + 1) for t, u in zip(frames, labels))


def test_two_dimensional_sort_cuts_padding_on_random_lengths():
    generator = torch.Generator().manual_seed(0)
    frames = tuple(torch.randint(50, 1000, (256,), generator=generator).tolist())
    labels = tuple(torch.randint(5, 200, (256,), generator=generator).tolist())
    plan = plan_groups(frames, labels, budget=4 * 1000 * 200, bytes_per_cell=1)
    by_size = sorted(range(256), key=lambda b: frames[b] * (labels[b] + 1), reverse=True)
    # the same greedy grouping over the 1-D (lattice size) order, for comparison
    size_padded, members = 0, []
    for b in by_size + [None]:
        grown = members + [b] if b is not None else members
        cells = len(grown) * max(frames[i] for i in grown) * (max(labels[i] for i in grown) + 1) if grown else 0
        if b is None or (members and cells > 4 * 1000 * 200):
            size_padded += len(members) * max(frames[i] for i in members) * (max(labels[i] for i in members) + 1)
            members = [b]
        else:
            members = grown
    assert padded_cells(plan) < 0.8 * size_padded


def test_max_samples_per_group():
    plan = plan_groups((5,) * 7, (2,) * 7, budget=10**9, bytes_per_cell=1, max_samples_per_group=3)
    assert [len(g.samples) for g in plan.groups] == [3, 3, 1]
    with pytest.raises(ValueError, match="max_samples_per_group must be None or a positive int"):
        TransducerLoss("samplewise", max_samples_per_group=0)
    assert "max_samples_per_group=2" in repr(TransducerLoss("samplewise", max_samples_per_group=2))


def test_one_sample_per_group_matches_batched(make_joint_problem):
    problem = make_joint_problem(batch=4, seed=30)
    inputs = [problem.encoder_out, problem.predictor_out, *problem.joint.parameters()]
    expected = torch.autograd.grad(transducer_loss(problem.joint(*inputs[:2]), *problem.lattice()), inputs)
    loss = samplewise_transducer_loss(*inputs[:2], problem.joint, *problem.lattice(), max_samples_per_group=1)
    for got, want in zip(torch.autograd.grad(loss, inputs), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_the_plan_is_public_and_logged_once_per_loss(make_joint_problem, caplog):
    """``TransducerLoss.plan`` gives the plan before a call, ``last_plan`` the one a call ran; the first plan of
    each loss object is logged at INFO, later ones at DEBUG; the functional form logs nothing."""
    problem = make_joint_problem(batch=3, seed=31)
    args = (problem.encoder_out, problem.predictor_out, problem.joint, *problem.lattice())
    with caplog.at_level(logging.DEBUG, logger="asr_plugin.losses"):
        samplewise_transducer_loss(*args, memory_budget="2KiB")
        assert caplog.records == []
        loss = TransducerLoss("samplewise", memory_budget="2KiB")
        assert loss.last_plan is None
        planned = loss.plan(*args)
        for _ in range(2):
            loss(*args)
        TransducerLoss("samplewise", memory_budget="2KiB")(*args)
    assert loss.last_plan == planned == plan_samplewise(*args, memory_budget="2KiB")
    assert [record.levelno for record in caplog.records] == [logging.INFO, logging.DEBUG, logging.INFO]
    message = caplog.records[0].getMessage()
    assert (
        f"3 samples in {len(planned.groups)} groups, {planned.steps} steps" in message and "estimated peak" in message
    )
    assert planned.steps > len(planned.groups) and sorted(planned.order) == [0, 1, 2]
    # inputs and their gradients, parameter-gradient buffers
    fixed = 2 * (problem.encoder_out.nbytes + problem.predictor_out.nbytes) + 2 * sum(
        p.nbytes for p in problem.joint.parameters()
    )
    assert planned.fixed_bytes == fixed and planned.estimated_peak_bytes() == fixed + planned.step_bytes()


def test_the_plan_counts_the_duration_outputs(make_joint_problem):
    """TDT: the joint's D extra scores and the lattice's 6 + D statistics per cell are in the bytes per cell."""
    from asr_plugin.losses.planning import cell_bytes
    from asr_plugin.models import Joint

    problem = make_joint_problem(batch=3, seed=33)
    hidden, vocab = 6, 8
    durations = [0, 1, 2, 3, 4]
    rnnt_joint, tdt_joint = Joint(6, 7, hidden, vocab), Joint(6, 7, hidden, vocab, num_extra_outputs=5)
    args = (problem.encoder_out, problem.predictor_out)
    rnnt = plan_samplewise(*args, rnnt_joint, *problem.lattice())
    tdt = plan_samplewise(*args, tdt_joint, *problem.lattice(), lattice=TDT(durations))
    assert rnnt.bytes_per_cell == cell_bytes(vocab, torch.float32, hidden, torch.float32, 2, 0, 5)
    assert tdt.bytes_per_cell == cell_bytes(vocab + 5, torch.float32, hidden, torch.float32, 2, 0, 6 + 5)
    assert tdt.bytes_per_cell.step - rnnt.bytes_per_cell.step == 5 * 4  # D float32 scores
    assert tdt.bytes_per_cell.lattice - rnnt.bytes_per_cell.lattice == 6 * 4  # 1 + D more statistics
    with pytest.raises(
        ValueError, match=r"joint.num_extra_outputs = 5 .* lattice RNNT\(clamp=None, fastemit_lambda=0.0\) needs 0"
    ):
        plan_samplewise(*args, tdt_joint, *problem.lattice())
    with pytest.raises(
        ValueError, match=r"joint.num_extra_outputs = 0 .* lattice TDT\(durations=\(0, 1, 2, 3, 4\), .*\) needs 5"
    ):
        TransducerLoss("batched", lattice=TDT(durations))(*args, rnnt_joint, *problem.lattice())


@pytest.mark.parametrize("max_samples", [None, 1])
def test_non_finite_sample_is_named_in_the_callers_order(make_joint_problem, max_samples):
    """The kernels flag samples in plan order; the error names the caller's sample id."""
    problem = make_joint_problem(batch=4, seed=32)
    encoder_out = problem.encoder_out.detach().clone()
    encoder_out[3, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="logits of sample 3 are not finite"):
        samplewise_transducer_loss(
            encoder_out, problem.predictor_out, problem.joint, *problem.lattice(), max_samples_per_group=max_samples
        )
