"""A standard joint run fused by the sample-wise loss: same values and gradients as its autograd graph."""

import pytest
import torch
from loss_checks import assert_seeded_loss_gradient
from torch import nn

from asr_plugin.losses import StandardJoint, plan_samplewise, samplewise_transducer_loss, transducer_loss
from asr_plugin.losses.planning import cell_bytes
from asr_plugin.losses.runner_choice import make_runner
from asr_plugin.losses.runners import FusedRunner, GraphRunner
from asr_plugin.models import Joint


def make_case(activation, batch=5, frames=9, labels=4, vocab=8, hidden=6, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    joint = Joint(hidden, hidden + 1, hidden + 2, vocab, activation=activation).to(dtype)
    encoder_out = torch.randn(batch, frames, hidden, generator=generator, dtype=dtype).requires_grad_()
    predictor_out = torch.randn(batch, labels + 1, hidden + 1, generator=generator, dtype=dtype).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), generator=generator)
    logit_lengths = torch.randint(1, frames + 1, (batch,), generator=generator)
    target_lengths = torch.randint(0, labels + 1, (batch,), generator=generator)
    logit_lengths[0], target_lengths[0] = frames, labels
    return joint, encoder_out, predictor_out, (targets, logit_lengths, target_lengths)


def loss_and_grads(loss_fn, joint, encoder_out, predictor_out, upstream):
    inputs = [encoder_out, predictor_out, *joint.parameters()]
    loss = loss_fn()
    return [loss.detach(), *torch.autograd.grad(loss, inputs, upstream)]


@pytest.mark.parametrize("activation", ["tanh", "relu", "gelu"])
@pytest.mark.parametrize("cells", [None, 60, 8])  # one group, several groups, T-chunks
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_fused_matches_batched(activation, cells, reduction):
    joint, encoder_out, predictor_out, lattice = make_case(activation, seed=3)
    assert isinstance(joint, StandardJoint) and isinstance(make_runner(joint), FusedRunner)
    budget = None if cells is None else cells * cell_bytes(8, torch.float32, joint.hidden_dim, torch.float32, 3).total
    upstream = torch.linspace(0.3, 2.0, 5) if reduction == "none" else torch.tensor(1.3)

    def batched():
        return transducer_loss(joint(encoder_out, predictor_out), *lattice, reduction=reduction)

    def samplewise():
        return samplewise_transducer_loss(
            encoder_out, predictor_out, joint, *lattice, reduction=reduction, memory_budget=budget
        )

    expected = loss_and_grads(batched, joint, encoder_out, predictor_out, upstream)
    ours = loss_and_grads(samplewise, joint, encoder_out, predictor_out, upstream)
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_fused_bf16_autocast_matches_batched():
    joint, encoder_out, predictor_out, lattice = make_case("tanh", vocab=16, seed=4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = loss_and_grads(
            lambda: transducer_loss(joint(encoder_out, predictor_out), *lattice),
            joint,
            encoder_out,
            predictor_out,
            torch.tensor(1.0),
        )
        ours = loss_and_grads(
            lambda: samplewise_transducer_loss(encoder_out, predictor_out, joint, *lattice, memory_budget="16KiB"),
            joint,
            encoder_out,
            predictor_out,
            torch.tensor(1.0),
        )
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


def test_frozen_output_layer_and_inputs_without_grad():
    joint, encoder_out, predictor_out, lattice = make_case("relu", seed=5)
    joint.output.requires_grad_(False)
    encoder_out = encoder_out.detach()
    params = [p for p in joint.parameters() if p.requires_grad]
    expected = torch.autograd.grad(
        transducer_loss(joint(encoder_out, predictor_out), *lattice), [predictor_out, *params]
    )
    loss = samplewise_transducer_loss(encoder_out, predictor_out, joint, *lattice, memory_budget="4KiB")
    for got, want in zip(torch.autograd.grad(loss, [predictor_out, *params]), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_when_the_joint_is_not_fused():
    joint = Joint(4, 4, 6, 5, dropout=0.1)
    runner = make_runner(joint)  # training: fused with dropout, recomputations replay the RNG state
    assert isinstance(runner, FusedRunner) and runner.dropout == pytest.approx(0.1) and runner.records_rng
    runner = make_runner(joint.eval())
    assert isinstance(runner, FusedRunner) and runner.dropout == 0.0 and not runner.records_rng
    joint.train().dropout = nn.AlphaDropout(0.1)  # not the dropout the fused path implements
    assert isinstance(make_runner(joint), GraphRunner)
    joint = Joint(4, 4, 6, 5)
    joint.activation = nn.SiLU()  # not the activation its name says
    assert isinstance(make_runner(joint), GraphRunner)

    class Scaled(Joint):
        def combine(self, encoder_proj, predictor_proj):
            return 2 * super().combine(encoder_proj, predictor_proj)

    assert isinstance(make_runner(Scaled(4, 4, 6, 5)), GraphRunner)


def test_parameter_hooks_fire_once_per_backward():
    """The joint runs on detached parameter leaves, so a hook on a parameter sees only the final gradient."""
    graph_joint = Joint(6, 7, 8, 8)
    graph_joint.activation = nn.Softsign()  # called as a module
    for joint, budget in (
        (make_case("tanh")[0], "2KiB"),
        (Joint(6, 7, 8, 8, dropout=0.2), "2KiB"),
        (graph_joint, "2KiB"),
    ):
        _, encoder_out, predictor_out, lattice = make_case("tanh")
        calls = []
        joint.output.weight.register_hook(lambda grad: calls.append(grad))
        loss = samplewise_transducer_loss(encoder_out, predictor_out, joint, *lattice, memory_budget=budget)
        assert calls == []
        loss.backward()
        assert len(calls) == 1
        torch.testing.assert_close(calls[0], joint.output.weight.grad)


@pytest.mark.parametrize("fused", [True, False])
def test_parameters_are_restored_when_the_joint_raises(fused):
    """The joint's parameters are swapped for detached leaves for a whole pass; an error inside it (here the
    third projection call / joint call) leaves the module with its own Parameters again."""
    joint, encoder_out, predictor_out, lattice = make_case("tanh", seed=6)
    if not fused:
        joint.activation = nn.Softsign()  # not fusable: called as a module
    originals = {name: p for name, p in joint.named_parameters()}
    calls = []

    def fail_on_third_call(module, args, output):
        calls.append(module)
        if len(calls) == 3:
            raise RuntimeError("joint failed")

    hooked = joint.encoder_proj if fused else joint
    handle = hooked.register_forward_hook(fail_on_third_call)
    with pytest.raises(RuntimeError, match="joint failed"):
        samplewise_transducer_loss(encoder_out, predictor_out, joint, *lattice, memory_budget="2KiB")
    handle.remove()
    assert all(p is originals[name] for name, p in joint.named_parameters())
    assert len(list(joint.parameters())) == len(originals)
    loss = samplewise_transducer_loss(encoder_out, predictor_out, joint, *lattice, memory_budget="2KiB")
    loss.backward()
    assert all(p.grad is not None for p in joint.parameters())


def _dropout_problem(activation, dtype=torch.float64, batch=1, seed=7):
    joint, encoder_out, predictor_out, lattice = make_case(activation, batch=batch, dtype=dtype, seed=seed)
    joint.dropout.p = 0.4
    return joint.train(), encoder_out, predictor_out, lattice


ON_GPU = pytest.param(
    "cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
)


@pytest.mark.parametrize("device", ["cpu", ON_GPU])
@pytest.mark.parametrize("activation", ["tanh", "relu", "gelu"])
@pytest.mark.parametrize("chunked", [False, True])
def test_fused_dropout_matches_a_reference_with_the_same_masks(activation, chunked, device):
    """Fused dropout is inverted dropout on the activations with one bool mask per chunk (True: dropped), drawn
    from the global RNG in chunk order (after the loss's one-cell probe of the joint); the reference draws the
    same masks and runs the joint's math through autograd and the batched loss."""
    joint, encoder_out, predictor_out, lattice = _dropout_problem(activation)
    joint, lattice = joint.to(device), [tensor.to(device) for tensor in lattice]
    encoder_out, predictor_out = (
        tensor.detach().to(device).requires_grad_() for tensor in (encoder_out, predictor_out)
    )
    _, labels_plus_one, hidden = encoder_out.shape[1], predictor_out.shape[1], joint.hidden_dim
    budget = (4 if chunked else 100) * labels_plus_one * cell_bytes(8, torch.float64, hidden, torch.float64, 2, 1).total
    chunks = plan_samplewise(encoder_out, predictor_out, joint, *lattice, memory_budget=budget).groups[0].chunks()
    assert len(chunks) == (3 if chunked else 1)

    def reference():
        torch.manual_seed(0)
        joint(encoder_out[:1, :1], predictor_out[:1, :1])  # the loss's probe draws from the RNG first
        shapes = [(1, t1 - t0, labels_plus_one, hidden) for t0, t1 in chunks]
        dropped = [torch.empty(shape, dtype=torch.bool, device=device).bernoulli_(0.4) for shape in shapes]
        pre = joint.project_encoder(encoder_out).unsqueeze(2) + joint.project_predictor(predictor_out).unsqueeze(1)
        act = {"tanh": torch.tanh, "relu": torch.relu, "gelu": torch.nn.functional.gelu}[activation](pre)
        return transducer_loss(joint.output(act.masked_fill(torch.cat(dropped, 1), 0) / 0.6), *lattice, reduction="sum")

    def samplewise():
        torch.manual_seed(0)
        return samplewise_transducer_loss(
            encoder_out, predictor_out, joint, *lattice, reduction="sum", memory_budget=budget
        )

    upstream = torch.tensor(1.0, dtype=torch.float64, device=device)
    expected = loss_and_grads(reference, joint, encoder_out, predictor_out, upstream)
    ours = loss_and_grads(samplewise, joint, encoder_out, predictor_out, upstream)
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_fused_dropout_gradient_is_that_of_the_seeded_loss(reduction):
    """Several groups and T-chunks (and, for "none", the backward's recomputation): every pass sees the masks of
    the first, so the gradient matches a finite difference of the loss under the same seed."""
    joint, encoder_out, predictor_out, lattice = _dropout_problem("tanh", batch=4, seed=8)
    assert_seeded_loss_gradient(
        lambda: samplewise_transducer_loss(
            encoder_out, predictor_out, joint, *lattice, reduction=reduction, memory_budget="3KiB"
        ),
        joint.output.weight,
        reduction,
    )


def test_fused_dropout_is_random_in_training_and_off_in_eval():
    joint, encoder_out, predictor_out, lattice = _dropout_problem("relu", batch=3, seed=9)

    def loss(seed):
        torch.manual_seed(seed)
        return samplewise_transducer_loss(encoder_out, predictor_out, joint, *lattice, memory_budget="3KiB")

    assert not torch.allclose(loss(0), loss(1))
    joint.eval()
    torch.testing.assert_close(loss(0), transducer_loss(joint(encoder_out, predictor_out), *lattice))
