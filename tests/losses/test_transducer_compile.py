"""torch.compile: a compiled model step graph-breaks around the loss and matches eager; the ops' fake kernels
agree with the real ones (torch.library.opcheck)."""

import pytest
import torch
from loss_lattices import logits_grad_args
from torch import nn

from asr_plugin.losses import TransducerLoss
from asr_plugin.losses.extension import ops_for


class TinyModel(nn.Module):
    """Linear encoder and predictor over given features, a joint (6, 7 -> V), and the loss."""

    def __init__(self, joint: nn.Module, loss: TransducerLoss) -> None:
        super().__init__()
        self.encoder = nn.Linear(5, 6)
        self.predictor = nn.Linear(3, 7)
        self.joint = joint
        self.loss = loss

    def forward(self, features, labels_in, targets, logit_lengths, target_lengths):
        encoder_out = torch.relu(self.encoder(features))  # (B, T, 6)
        predictor_out = torch.tanh(self.predictor(labels_in))  # (B, U+1, 7)
        return self.loss(encoder_out, predictor_out, self.joint, targets, logit_lengths, target_lengths)


class LocalTanhJoint(nn.Module):
    """loss_joints.TanhJoint (sharing its layers) with its forward defined here, so the compiled code is this
    file's own: dynamo guards a traced function's globals through its module's name."""

    def __init__(self, joint: nn.Module) -> None:
        super().__init__()
        self.hidden_dim, self.num_extra_outputs = joint.hidden_dim, joint.num_extra_outputs
        self.encoder_proj, self.predictor_proj, self.output = joint.encoder_proj, joint.predictor_proj, joint.output

    def forward(self, encoder_out, predictor_out):  # (N, T, H_e), (N, U+1, H_p) -> (N, T, U+1, V)
        hidden = self.encoder_proj(encoder_out).unsqueeze(2) + self.predictor_proj(predictor_out).unsqueeze(1)
        return self.output(torch.tanh(hidden))


@pytest.mark.parametrize("mode", ["samplewise", "batched"])
def test_compiled_step_matches_eager(make_joint_problem, mode):
    torch.manual_seed(0)
    problem = make_joint_problem(batch=3, frames=7, labels=3, vocab=9, hidden=6)
    features, labels_in = torch.randn(3, 7, 5), torch.randn(3, 4, 3)
    model = TinyModel(LocalTanhJoint(problem.joint), TransducerLoss(mode, memory_budget="4KiB"))
    args = (features, labels_in, *problem.lattice())

    def step(module):
        module.zero_grad(set_to_none=True)
        loss = module(*args)
        loss.backward()
        return [loss.detach()] + [p.grad.clone() for p in module.parameters()]

    expected = step(model)
    torch._dynamo.reset()
    ours = step(torch.compile(model, backend="aot_eager"))
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_fake_kernels_match_the_ops(make_problem):
    problem = make_problem(batch=2, frames=4, labels=3, vocab=5)
    ops = ops_for(torch.device("cpu"))
    logits = problem.logits.detach()
    lengths = (problem.targets, problem.logit_lengths, problem.target_lengths)
    bad = torch.zeros(2, dtype=torch.bool)
    checks = ("test_schema", "test_faketensor")
    torch.library.opcheck(ops.transducer_log_probs.default, (logits, *lengths, 0, 5, 0, bad), test_utils=checks)
    log_probs, denominators = ops.transducer_log_probs(logits, *lengths, 0, 5, 0, bad)
    torch.library.opcheck(ops.transducer_alphas_betas.default, (log_probs, *lengths[1:]), test_utils=checks)
    alphas, betas, nll = ops.transducer_alphas_betas(log_probs, *lengths[1:])
    stats = (log_probs, denominators, alphas, betas, nll)
    grad_args = logits_grad_args(logits, stats, lengths, 0, 5, 0, torch.ones(2), 0.0, torch.empty_like(logits), 0.01)
    torch.library.opcheck(ops.transducer_logits_grad.default, grad_args, test_utils=checks)


def test_tdt_fake_kernels_match_the_ops(make_problem):
    problem = make_problem(batch=2, frames=4, labels=3, vocab=7)  # V = 4 token scores, D = 3 durations
    ops = ops_for(torch.device("cpu"))
    logits, durations = problem.logits.detach(), [0, 1, 2]
    lengths = (problem.targets.clamp(max=3), problem.logit_lengths, problem.target_lengths)
    bad = torch.zeros(2, dtype=torch.bool)
    checks = ("test_schema", "test_faketensor")
    torch.library.opcheck(ops.tdt_log_probs.default, (logits, *lengths, 0, 3, 0.05, 0, bad), test_utils=checks)
    log_probs, denominators = ops.tdt_log_probs(logits, *lengths, 0, 3, 0.05, 0, bad)
    assert log_probs.shape == (2, 4, 4, 5) and denominators.shape == (2, 4, 4, 2)
    torch.library.opcheck(ops.tdt_alphas_betas.default, (log_probs, *lengths[1:], durations), test_utils=checks)
    alphas, betas, nll = ops.tdt_alphas_betas(log_probs, *lengths[1:], durations)
    stats = (log_probs, denominators, alphas, betas, nll)
    grad_args = logits_grad_args(logits, stats, lengths, 0, durations, 0, torch.ones(2), 0.0, torch.empty_like(logits))
    torch.library.opcheck(ops.tdt_logits_grad.default, grad_args, test_utils=checks)


def test_kernel_checks_reject_bad_arguments(make_problem):
    """A direct op call with a non-contiguous tensor, a wrong dtype or bad durations fails with a clear message."""
    problem = make_problem(batch=2, frames=4, labels=3, vocab=5)
    ops = ops_for(torch.device("cpu"))
    lengths = (problem.targets, problem.logit_lengths, problem.target_lengths)
    bad = torch.zeros(2, dtype=torch.bool)
    logits = problem.logits.detach()
    strided = logits.transpose(1, 2)
    with pytest.raises(RuntimeError, match="logits must be contiguous"):
        ops.transducer_log_probs(strided, *lengths, 0, 5, 0, bad)
    with pytest.raises(RuntimeError, match="targets must be Long"):
        ops.transducer_log_probs(logits, problem.targets.int(), *lengths[1:], 0, 5, 0, bad)
    with pytest.raises(RuntimeError, match="bad must be Bool"):
        ops.transducer_log_probs(logits, *lengths, 0, 5, 0, bad.int())
    with pytest.raises(RuntimeError, match=r"vocab must be in \[2, W = 5\]"):
        ops.transducer_log_probs(logits, *lengths, 0, 6, 0, bad)
    with pytest.raises(RuntimeError, match="num_durations must be in"):
        ops.tdt_log_probs(logits, *lengths, 0, 1, 0.0, 0, bad)
    log_probs, _ = ops.tdt_log_probs(logits, *lengths, 0, 2, 0.0, 0, bad)
    with pytest.raises(RuntimeError, match="durations must start with 0, 1"):
        ops.tdt_alphas_betas(log_probs, *lengths[1:], [1, 2])
    with pytest.raises(RuntimeError, match="log_probs must be \\(N, T, U\\+1, 5\\)"):
        ops.tdt_alphas_betas(log_probs, *lengths[1:], [0, 1, 2])
