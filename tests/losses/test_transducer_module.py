"""TransducerLoss: one call signature for both modes, and memory_budget parsing."""

import pytest
import torch

from asr_plugin.losses import RNNT, TransducerLoss, parse_memory_budget, transducer_loss


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_modes_agree(make_joint_problem, reduction):
    problem = make_joint_problem(batch=4, seed=31)
    args = (problem.encoder_out, problem.predictor_out, problem.joint, *problem.lattice())
    upstream = torch.linspace(0.5, 1.5, 4) if reduction == "none" else torch.tensor(1.0)
    results = []
    for module in (
        TransducerLoss("batched", reduction=reduction),
        TransducerLoss("samplewise", reduction=reduction, memory_budget="64KiB"),
    ):
        loss = module(*args)
        results.append(
            (loss.detach(), *torch.autograd.grad(loss, [problem.encoder_out, *problem.joint.parameters()], upstream))
        )
    logits = problem.joint(problem.encoder_out, problem.predictor_out)
    torch.testing.assert_close(results[0][0], transducer_loss(logits, *problem.lattice(), reduction=reduction).detach())
    for ours, expected in zip(results[1], results[0]):
        torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)


def test_module_options_and_repr():
    module = TransducerLoss("samplewise", RNNT(clamp=1.0), blank=0, reduction="sum", memory_budget="2GB")
    assert module.memory_budget == 2 * 10**9
    assert "mode='samplewise', lattice=RNNT(clamp=1.0, fastemit_lambda=0.0)" in repr(
        module
    ) and "memory_budget=2000000000" in repr(module)
    with pytest.raises(ValueError, match=r"mode must be one of \('batched', 'samplewise'\), got 'sample'"):
        TransducerLoss("sample")
    with pytest.raises(ValueError, match="reduction must be one of"):
        TransducerLoss(reduction="avg")
    with pytest.raises(ValueError, match="memory_budget: cannot parse '12 parsecs'"):
        TransducerLoss("samplewise", memory_budget="12 parsecs")


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        (1024, 1024),
        ("512MiB", 512 * 2**20),
        ("2GB", 2 * 10**9),
        ("1.5 GiB", int(1.5 * 2**30)),
        ("100kb", 100_000),
        ("4096", 4096),
        ("3 b", 3),
    ],
)
def test_parse_memory_budget(value, expected):
    assert parse_memory_budget(value) == expected


@pytest.mark.parametrize(
    "value, error, match",
    [
        ("fast", ValueError, "memory_budget: cannot parse 'fast'"),
        ("5 XB", ValueError, "cannot parse"),
        (0, ValueError, "memory_budget must be positive"),
        ("-1MiB", ValueError, "cannot parse"),
        (True, TypeError, "memory_budget must be a number of bytes"),
        ([1], TypeError, "memory_budget"),
    ],
)
def test_parse_memory_budget_errors(value, error, match):
    with pytest.raises(error, match=match):
        parse_memory_budget(value)
