"""Checks shared by the loss tests (a module of its own, not conftest.py, so test files can import it by a name
no other test directory uses)."""

import torch


def assert_gradient_is_the_finite_difference(loss_fn, weight: torch.Tensor, eps: float = 1e-6) -> None:
    """d loss_fn() / d `weight` (float64) along a random direction equals the central finite difference of
    loss_fn: for a loss with dropout, `loss_fn` seeds the RNG, and this holds only if every pass of the loss
    (T-chunks, recomputations) used the masks of the first."""
    (grad,) = torch.autograd.grad(loss_fn(), weight)
    direction = torch.randn(weight.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        weight += eps * direction
        plus = loss_fn()
        weight -= 2 * eps * direction
        minus = loss_fn()
        weight += eps * direction
    torch.testing.assert_close((plus - minus) / (2 * eps), (grad * direction).sum(), rtol=1e-6, atol=1e-6)


def assert_seeded_loss_gradient(loss_fn, weight: torch.Tensor, reduction: str):
    """`assert_gradient_is_the_finite_difference` of `loss_fn()` (a loss over 4 samples, of `reduction`) under seed
    0, weighted by an upstream gradient (for "none" a different weight per sample, so the backward recomputes);
    returns that seeded, weighted loss."""
    upstream = (
        torch.tensor([0.5, 1.0, 2.0, 1.5], dtype=torch.float64)
        if reduction == "none"
        else torch.tensor(1.0, dtype=torch.float64)
    )

    def seeded_loss():
        torch.manual_seed(0)
        return (loss_fn() * upstream).sum()

    assert_gradient_is_the_finite_difference(seeded_loss, weight)
    return seeded_loss
