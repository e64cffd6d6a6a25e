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
