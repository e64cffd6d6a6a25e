"""Batched transducer loss: values and gradients against torchaudio and a float64 reference."""

import pytest
import torch
import torchaudio

from asr_plugin.losses import RNNT, transducer_loss


def torchaudio_loss(problem, reduction="none", clamp=None, logits=None):
    logits = problem.logits if logits is None else logits
    return torchaudio.functional.rnnt_loss(
        logits,
        problem.targets.int(),
        problem.logit_lengths.int(),
        problem.target_lengths.int(),
        blank=problem.blank,
        clamp=-1 if clamp is None else clamp,
        reduction=reduction,
        fused_log_softmax=True,
    )


def values_and_grad(loss_fn, logits, upstream):
    loss = loss_fn()
    (grad,) = torch.autograd.grad(loss, logits, upstream)
    return loss.detach(), grad


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("blank_at_end", [False, True])
def test_matches_torchaudio(make_problem, reduction, blank_at_end):
    problem = make_problem(batch=4, frames=11, labels=5, vocab=9, blank=8 if blank_at_end else 0, seed=1)
    upstream = torch.rand(4) + 0.5 if reduction == "none" else torch.tensor(1.7)
    ours = values_and_grad(
        lambda: transducer_loss(*problem.args(), blank=problem.blank, reduction=reduction), problem.logits, upstream
    )
    theirs = values_and_grad(lambda: torchaudio_loss(problem, reduction), problem.logits, upstream)
    torch.testing.assert_close(ours[0], theirs[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "batch, frames, labels, vocab, blank",
    [
        (1, 1, 0, 2, 0),  # T=1, U=0, V=2, B=1
        (2, 1, 3, 5, 0),  # T=1 with labels: every label emitted in the only frame
        (3, 6, 0, 4, 3),  # U=0, blank = V-1
        (1, 7, 5, 2, 1),  # V=2, blank=1
        (4, 5, 3, 6, 2),  # blank in the middle, variable lengths
    ],
)
def test_matches_float64_reference(make_problem, reference, batch, frames, labels, vocab, blank):
    problem = make_problem(batch, frames, labels, vocab, blank, dtype=torch.float64, seed=batch + frames)
    upstream = torch.rand(batch, dtype=torch.float64) + 0.5
    ours = values_and_grad(
        lambda: transducer_loss(*problem.args(), blank=blank, reduction="none"), problem.logits, upstream
    )
    expected = values_and_grad(lambda: reference(*problem.args(), blank), problem.logits, upstream)
    torch.testing.assert_close(ours[0], expected[0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ours[1], expected[1], rtol=1e-10, atol=1e-10)


def test_gradcheck_float64(make_problem):
    problem = make_problem(batch=2, frames=3, labels=2, vocab=4, blank=1, dtype=torch.float64, seed=3)
    assert torch.autograd.gradcheck(
        lambda logits: transducer_loss(logits, *problem.args()[1:], blank=1, reduction="none"), (problem.logits,)
    )


def test_output_dtype_and_integer_dtypes(make_problem):
    problem = make_problem()
    expected = transducer_loss(*problem.args(), reduction="none")
    assert expected.dtype == torch.float32 and expected.shape == (3,)
    for dtype in (torch.int32, torch.int16, torch.uint8):
        loss = transducer_loss(
            problem.logits,
            problem.targets.to(dtype),
            problem.logit_lengths.to(dtype),
            problem.target_lengths.to(dtype),
            reduction="none",
        )
        torch.testing.assert_close(loss, expected)


@pytest.mark.parametrize("clamp", [0.05, 0.3])
def test_clamp_matches_torchaudio(make_problem, clamp):
    problem = make_problem(batch=3, frames=8, labels=4, vocab=6, seed=5)
    upstream = torch.tensor([0.5, 2.0, 1.0])
    ours = values_and_grad(
        lambda: transducer_loss(*problem.args(), RNNT(clamp=clamp), reduction="none"), problem.logits, upstream
    )
    theirs = values_and_grad(lambda: torchaudio_loss(problem, "none", clamp), problem.logits, upstream)
    torch.testing.assert_close(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
    assert ours[1].abs().max() <= clamp * 2.0 + 1e-6


@pytest.mark.parametrize("dtype, tolerance", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
def test_half_precision(make_problem, dtype, tolerance):
    problem = make_problem(batch=3, frames=10, labels=4, vocab=12, seed=6)
    half = problem.logits.detach().to(dtype).requires_grad_()
    exact = problem.logits.detach().to(dtype).float().requires_grad_()
    upstream = torch.tensor([1.0, 0.5, 2.0])
    ours = values_and_grad(lambda: transducer_loss(half, *problem.args()[1:], reduction="none"), half, upstream)
    expected = values_and_grad(lambda: transducer_loss(exact, *problem.args()[1:], reduction="none"), exact, upstream)
    assert ours[0].dtype == torch.float32 and ours[1].dtype == dtype
    torch.testing.assert_close(ours[0], expected[0], rtol=1e-5, atol=1e-5)  # float32 accumulation
    torch.testing.assert_close(ours[1].float(), expected[1], rtol=tolerance, atol=tolerance)


def test_no_grad_returns_same_values(make_problem):
    problem = make_problem()
    expected = transducer_loss(*problem.args(), reduction="none")
    with torch.no_grad():
        loss = transducer_loss(*problem.args(), reduction="none")
    assert loss.grad_fn is None
    torch.testing.assert_close(loss, expected.detach())


def test_padding_is_ignored(make_problem):
    """Scores outside each sample's valid lattice (even NaN) change neither the loss nor the gradient."""
    problem = make_problem(batch=3, frames=7, labels=4, seed=7)
    problem.logit_lengths[1:] = torch.tensor([3, 5])
    problem.target_lengths[1:] = torch.tensor([2, 0])
    padded = problem.logits.detach().clone()
    padded[1, 3:] = float("nan")
    padded[2, :, 1:] = float("nan")
    padded.requires_grad_()
    upstream = torch.ones(3)
    ours = values_and_grad(lambda: transducer_loss(padded, *problem.args()[1:], reduction="none"), padded, upstream)
    expected = values_and_grad(lambda: transducer_loss(*problem.args(), reduction="none"), problem.logits, upstream)
    torch.testing.assert_close(ours[0], expected[0])
    torch.testing.assert_close(ours[1], expected[1])
    assert (ours[1][1, 3:] == 0).all() and (ours[1][2, :, 1:] == 0).all()
