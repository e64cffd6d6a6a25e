"""The flash joint as the sample-wise loss's runner (``flash_joint="always"``, runners.FlashRunner): the unfused
sample-wise loss's value and every gradient, and the float64 reference's; its plan from the flash memory model
(no V in it); the reasons it declines."""

from __future__ import annotations

import pytest
import torch

from asr_plugin.losses import RNNT, TDT, TransducerLoss, plan_samplewise, samplewise_transducer_loss
from asr_plugin.losses.planning import flash_cell_bytes, plan_groups
from asr_plugin.models import Joint


def make_case(activation="tanh", bias=True, vocab=37, hidden=20, seed=0, dropout=0.0):
    """Four samples of different lengths (one with U = 0, one with T = 1) and a standard joint."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    joint = Joint(hidden - 3, hidden - 1, hidden, vocab, activation=activation, dropout=dropout)
    if not bias:
        joint.output.bias = None
    encoder_out = torch.randn(4, 6, hidden - 3, generator=generator).requires_grad_()  # (B, T, H_e)
    predictor_out = torch.randn(4, 5, hidden - 1, generator=generator).requires_grad_()  # (B, U+1, H_p)
    targets = torch.randint(1, vocab, (4, 4), generator=generator)
    lengths = (torch.tensor([6, 4, 1, 5]), torch.tensor([4, 0, 3, 2]))
    return joint, encoder_out, predictor_out, (targets, *lengths)


def values_and_grads(loss, inputs, upstream):
    return [loss.detach(), *torch.autograd.grad(loss, inputs, upstream)]


def float64_reference(reference, joint, encoder_out, predictor_out, lattice, upstream):
    """`reference` (tests/losses/conftest.py's: loops over each lattice) of a float64 copy of the joint."""
    joint64 = Joint(joint.encoder_proj.in_features, joint.predictor_proj.in_features, joint.hidden_dim, 1)
    joint64.output = torch.nn.Linear(joint.hidden_dim, joint.output.out_features, bias=joint.output.bias is not None)
    joint64.load_state_dict(joint.state_dict())
    joint64.activation_name, joint64.activation = joint.activation_name, joint.activation
    joint64 = joint64.double()
    encoder64 = encoder_out.detach().double().requires_grad_()
    predictor64 = predictor_out.detach().double().requires_grad_()
    nll = reference(joint64(encoder64, predictor64), *lattice, 0)
    return values_and_grads(nll, [encoder64, predictor64, *joint64.parameters()], upstream.double())


@pytest.mark.parametrize(
    "activation, bias, clamp, upstream, budget",
    [
        ("tanh", True, None, [0.5, 1.0, 2.0, -1.0], 3000),  # non-uniform: recomputed in backward; 4 groups
        ("relu", False, None, [1.0] * 4, None),  # one group, gradients formed in forward
        ("tanh", True, 0.02, [0.5, 1.0, 2.0, -1.0], 6000),  # the lattice's clamp reaches the flash kernels
    ],
)
def test_samplewise_flash_matches_unfused_and_float64_reference(reference, activation, bias, clamp, upstream, budget):
    joint, encoder_out, predictor_out, lattice = make_case(activation, bias)
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    upstream = torch.tensor(upstream)
    results = {}
    for flash_joint in ("always", "never"):
        loss_fn = TransducerLoss(
            "samplewise", RNNT(clamp=clamp), reduction="none", memory_budget=budget, flash_joint=flash_joint
        )
        results[flash_joint] = values_and_grads(loss_fn(encoder_out, predictor_out, joint, *lattice), inputs, upstream)
        assert loss_fn.last_plan.runner == ("flash" if flash_joint == "always" else "fused")
        if budget == 3000 and flash_joint == "always":
            assert len(loss_fn.last_plan.groups) == 4
    for ours, unfused in zip(results["always"], results["never"], strict=True):
        torch.testing.assert_close(ours, unfused, rtol=1e-4, atol=1e-5)
    if clamp is None:
        expected = float64_reference(reference, joint, encoder_out, predictor_out, lattice, upstream)
        for ours, exact in zip(results["always"], expected, strict=True):
            torch.testing.assert_close(ours, exact.float(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("frozen", ["output", "projections and inputs"])
def test_samplewise_flash_with_triton_recursions_and_frozen_parameters(frozen):
    """backend="triton" (the recursions in Triton too, as on a GPU) with a frozen output layer (its gradient
    buffers are written by the kernel but reach no parameter), or with frozen projections and inputs (no graph
    through the projections: the kernel's projection gradients go to scratch buffers)."""
    joint, encoder_out, predictor_out, lattice = make_case(seed=1)
    if frozen == "output":
        joint.output.requires_grad_(False)
    else:
        joint.encoder_proj.requires_grad_(False)
        joint.predictor_proj.requires_grad_(False)
        encoder_out, predictor_out = encoder_out.detach(), predictor_out.detach()
    inputs = [t for t in (encoder_out, predictor_out, *joint.parameters()) if t.requires_grad]
    results = [
        values_and_grads(
            samplewise_transducer_loss(
                encoder_out, predictor_out, joint, *lattice, backend=backend, flash_joint=flash_joint
            ),
            inputs,
            None,
        )
        for backend, flash_joint in (("triton", "always"), ("cpp", "never"))
    ]
    for ours, unfused in zip(*results, strict=True):
        torch.testing.assert_close(ours, unfused, rtol=1e-4, atol=1e-5)


def test_flash_plan_is_the_flash_cell_model_without_vocabulary():
    """Two joints that differ only in V (10 and 5000) give the same flash plan, the one ``plan_groups`` makes
    from ``flash_cell_bytes``; the unfused plan's cells grow with V (so this test could tell)."""
    frames, labels, hidden, budget = (6, 6, 5, 4, 3, 2), (4, 4, 3, 2, 1, 0), 20, 9000
    plans = {}
    for vocab in (10, 5000):
        joint, encoder_out, predictor_out, _ = make_case(vocab=vocab)
        encoder_out, predictor_out = encoder_out[:1].expand(6, -1, -1), predictor_out[:1].expand(6, -1, -1)
        targets = torch.ones(6, 4, dtype=torch.int64)
        lattice = (targets, torch.tensor(frames), torch.tensor(labels))
        for flash_joint in ("always", "never"):
            plans[vocab, flash_joint] = plan_samplewise(
                encoder_out, predictor_out, joint, *lattice, memory_budget=budget, flash_joint=flash_joint
            )
    cost = flash_cell_bytes(hidden, torch.float32, hidden - 1, torch.float32)
    expected = plan_groups(frames, labels, budget, cost, runner="flash")
    for vocab in (10, 5000):
        assert plans[vocab, "always"].bytes_per_cell == cost
        assert plans[vocab, "always"].groups == expected.groups
        assert plans[vocab, "always"].step_bytes() <= budget
    assert plans[10, "never"].bytes_per_cell.step < plans[5000, "never"].bytes_per_cell.step
    # the output layer's float32 gradient buffers are fixed bytes: V enters there, outside the budget
    assert plans[5000, "always"].fixed_bytes > plans[10, "always"].fixed_bytes


@pytest.mark.parametrize(
    "change, lattice, reason",
    [
        (dict(dropout=0.1), RNNT(), "joint dropout 0.1 in training mode"),
        (dict(activation="gelu"), RNNT(), "activation 'gelu'"),
        (dict(), RNNT(fastemit_lambda=0.01), "without FastEmit"),
    ],
)
def test_samplewise_flash_declines_by_name(change, lattice, reason):
    joint, encoder_out, predictor_out, sequences = make_case(**change)
    with pytest.raises(ValueError, match=f"flash_joint='always': the flash joint cannot run this call: .*{reason}"):
        samplewise_transducer_loss(encoder_out, predictor_out, joint, *sequences, lattice=lattice, flash_joint="always")
    # "auto" on the CPU and "never" run the fused runner instead
    loss_fn = TransducerLoss("samplewise", lattice, flash_joint="auto")
    loss_fn(encoder_out, predictor_out, joint, *sequences)
    assert loss_fn.last_plan.runner == "fused"


def test_samplewise_flash_declines_tdt_and_float64():
    joint, encoder_out, predictor_out, sequences = make_case()
    tdt_joint = Joint(17, 19, 20, 37, num_extra_outputs=3)
    with pytest.raises(ValueError, match="3 extra outputs"):
        samplewise_transducer_loss(
            encoder_out, predictor_out, tdt_joint, *sequences, lattice=TDT([0, 1, 2]), flash_joint="always"
        )
    with pytest.raises(ValueError, match="float64 joint outputs"):
        samplewise_transducer_loss(
            encoder_out.double(), predictor_out.double(), joint.double(), *sequences, flash_joint="always"
        )
