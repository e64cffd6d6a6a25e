"""Batched TDT loss: values and gradients against an independent float64 lattice recursion (tdt_reference.py),
the RNN-T fallback of omega, clamp, padding, half precision."""

import pytest
import torch
from loss_lattices import make_tdt_problem
from tdt_reference import tdt_reference_nll

from asr_plugin.losses import TDT, TransducerLoss, transducer_loss


def values_and_grad(loss_fn, logits, upstream):
    loss = loss_fn()
    (grad,) = torch.autograd.grad(loss, logits, upstream)
    return loss.detach(), grad


@pytest.mark.parametrize(
    "durations, sigma, shape, blank",
    [
        ([0, 1], 0.0, (3, 6, 3, 5), 0),  # the smallest duration set
        ([0, 1, 2], 0.05, (3, 7, 4, 6), 0),
        ([0, 1, 2, 3, 4], 0.02, (4, 9, 4, 7), 0),  # Parakeet-TDT's set
        ([0, 1, 3, 7], 0.1, (3, 10, 3, 5), 2),  # gaps in the set, blank in the middle
        ([0, 1, 2, 3, 4], 0.0, (2, 5, 0, 4), 3),  # U = 0: only blanks, blank = V - 1
        ([0, 1, 2, 3, 4, 5, 6, 7], 0.05, (2, 3, 4, 5), 0),  # durations longer than T (T = 3)
        ([0, 1, 2], 0.0, (2, 1, 3, 4), 0),  # T = 1: every label in the only frame, then a blank of 1
    ],
)
def test_matches_float64_reference(durations, sigma, shape, blank):
    batch, frames, labels, vocab = shape
    logits, *lattice = make_tdt_problem(batch, frames, labels, vocab, durations, blank=blank, seed=sum(shape))
    upstream = torch.rand(batch, dtype=torch.float64) + 0.5
    ours = values_and_grad(
        lambda: transducer_loss(logits, *lattice, blank=blank, reduction="none", lattice=TDT(durations, sigma)),
        logits,
        upstream,
    )
    expected = values_and_grad(lambda: tdt_reference_nll(logits, *lattice, blank, durations, sigma), logits, upstream)
    torch.testing.assert_close(ours[0], expected[0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ours[1], expected[1], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_float32_matches_reference(reduction):
    durations = [0, 1, 2, 3, 4]
    logits, *lattice = make_tdt_problem(5, 12, 5, 9, durations, seed=3)
    single = logits.detach().float().requires_grad_()
    upstream = torch.linspace(0.5, 2.0, 5) if reduction == "none" else torch.tensor(1.3)
    ours = values_and_grad(
        lambda: transducer_loss(single, *lattice, reduction=reduction, lattice=TDT(durations, 0.02)), single, upstream
    )
    losses = tdt_reference_nll(logits, *lattice, 0, durations, 0.02)
    reduced = {"none": losses, "sum": losses.sum(), "mean": losses.mean()}[reduction]
    expected = values_and_grad(lambda: reduced, logits, upstream.double())
    assert ours[0].dtype == torch.float32
    torch.testing.assert_close(ours[0].double(), expected[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours[1].double(), expected[1], rtol=1e-5, atol=1e-6)


def test_gradcheck_float64():
    logits, *lattice = make_tdt_problem(2, 4, 2, 4, [0, 1, 2], blank=1, seed=4)
    assert torch.autograd.gradcheck(
        lambda x: transducer_loss(x, *lattice, blank=1, reduction="none", lattice=TDT([0, 1, 2], 0.03)), (logits,)
    )


def test_the_duration_head_changes_the_loss_but_not_an_rnnt_call():
    """The default lattice, RNNT(), is the RNN-T loss over all W scores, no duration head."""
    logits, *lattice = make_tdt_problem(3, 6, 3, 6, [0, 1, 2], dtype=torch.float32, seed=5)
    rnnt = transducer_loss(logits, *lattice, reduction="none")
    tdt = transducer_loss(logits, *lattice, reduction="none", lattice=TDT([0, 1, 2]))
    assert rnnt.shape == tdt.shape == (3,) and not torch.allclose(rnnt, tdt)


def test_omega_draws_rnnt_over_the_token_scores_per_call():
    """With probability omega a call is the RNN-T loss of the V token scores (no sigma), and the duration scores
    get a zero gradient; one draw per call from torch's default generator, so torch.manual_seed replays it."""
    durations, vocab = [0, 1, 2, 3], 6
    logits, *lattice = make_tdt_problem(3, 7, 3, vocab, durations, seed=6)
    rnnt = values_and_grad(
        lambda: transducer_loss(logits[..., :vocab], *lattice, reduction="sum"), logits, torch.tensor(1.0)
    )
    tdt = values_and_grad(
        lambda: transducer_loss(logits, *lattice, reduction="sum", lattice=TDT(durations, 0.05)),
        logits,
        torch.tensor(1.0),
    )
    branches = []
    for seed in range(12):
        torch.manual_seed(seed)
        takes_rnnt = torch.rand(()).item() < 0.4
        torch.manual_seed(seed)
        ours = values_and_grad(
            lambda: transducer_loss(logits, *lattice, reduction="sum", lattice=TDT(durations, 0.05), omega=0.4),
            logits,
            torch.tensor(1.0),
        )
        expected = rnnt if takes_rnnt else tdt
        torch.testing.assert_close(ours[0], expected[0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(ours[1], expected[1], rtol=1e-12, atol=1e-12)
        branches.append(takes_rnnt)
    assert any(branches) and not all(branches)
    assert (rnnt[1][..., vocab:] == 0).all()
    always = transducer_loss(logits, *lattice, reduction="sum", lattice=TDT(durations, 0.05), omega=1.0)
    torch.testing.assert_close(always.detach(), rnnt[0])


def test_clamp_applies_to_the_token_scores_only():
    """As NeMo's TDT loss: the token scores' gradient is clamped (before the upstream), the durations' is not."""
    durations, vocab, clamp = [0, 1, 2], 5, 0.05
    logits, *lattice = make_tdt_problem(3, 6, 3, vocab, durations, seed=7)
    upstream = torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64)
    ours = values_and_grad(
        lambda: transducer_loss(logits, *lattice, reduction="none", lattice=TDT(durations, clamp=clamp)),
        logits,
        upstream,
    )
    losses = tdt_reference_nll(logits, *lattice, 0, durations)
    (per_sample,) = torch.autograd.grad(losses.sum(), logits)  # each sample's own gradient, upstream 1
    expected = per_sample.clone()
    expected[..., :vocab] = expected[..., :vocab].clamp(-clamp, clamp)
    expected *= upstream.view(-1, 1, 1, 1)
    torch.testing.assert_close(ours[0], losses.detach(), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ours[1], expected, rtol=1e-10, atol=1e-10)
    assert ours[1][..., vocab:].abs().max() > clamp * upstream.max()  # the durations' gradient is not clamped


def test_padding_is_ignored():
    """Scores outside each sample's valid lattice (even NaN) change neither the loss nor the gradient."""
    durations = [0, 1, 2, 3]
    logits, targets, logit_lengths, target_lengths = make_tdt_problem(
        3, 7, 4, 6, durations, dtype=torch.float32, seed=8
    )
    logit_lengths[1:] = torch.tensor([3, 5])
    target_lengths[1:] = torch.tensor([2, 0])
    padded = logits.detach().clone()
    padded[1, 3:] = float("nan")
    padded[2, :, 1:] = float("nan")
    padded.requires_grad_()
    lattice = (targets, logit_lengths, target_lengths)
    ours = values_and_grad(
        lambda: transducer_loss(padded, *lattice, reduction="none", lattice=TDT(durations)), padded, torch.ones(3)
    )
    expected = values_and_grad(
        lambda: transducer_loss(logits, *lattice, reduction="none", lattice=TDT(durations)), logits, torch.ones(3)
    )
    torch.testing.assert_close(ours[0], expected[0])
    torch.testing.assert_close(ours[1], expected[1])
    assert (ours[1][1, 3:] == 0).all() and (ours[1][2, :, 1:] == 0).all()


@pytest.mark.parametrize("dtype, tolerance", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
def test_half_precision(dtype, tolerance):
    durations = [0, 1, 2, 3, 4]
    logits, *lattice = make_tdt_problem(3, 10, 4, 12, durations, dtype=torch.float32, seed=9)
    half = logits.detach().to(dtype).requires_grad_()
    exact = logits.detach().to(dtype).float().requires_grad_()
    upstream = torch.tensor([1.0, 0.5, 2.0])
    options = dict(reduction="none", lattice=TDT(durations, 0.02))
    ours = values_and_grad(lambda: transducer_loss(half, *lattice, **options), half, upstream)
    expected = values_and_grad(lambda: transducer_loss(exact, *lattice, **options), exact, upstream)
    assert ours[0].dtype == torch.float32 and ours[1].dtype == dtype
    torch.testing.assert_close(ours[0], expected[0], rtol=1e-5, atol=1e-5)  # float32 accumulation
    torch.testing.assert_close(ours[1].float(), expected[1], rtol=tolerance, atol=tolerance)


def test_module_in_batched_mode(make_joint_problem):
    """TransducerLoss(lattice=TDT(...)) over a joint with V + D outputs equals the functional form."""
    problem = make_joint_problem(batch=3, frames=6, labels=3, vocab=7, num_extra_outputs=3, seed=10)
    module = TransducerLoss("batched", reduction="sum", lattice=TDT((0, 1, 2), 0.05))
    assert "lattice=TDT(durations=(0, 1, 2), sigma=0.05, clamp=None), blank=0" in repr(module)
    args = (problem.encoder_out, problem.predictor_out, problem.joint, *problem.lattice())
    logits = problem.joint(problem.encoder_out, problem.predictor_out)
    expected = transducer_loss(logits, *problem.lattice(), reduction="sum", lattice=TDT([0, 1, 2], 0.05))
    torch.testing.assert_close(module(*args), expected)
