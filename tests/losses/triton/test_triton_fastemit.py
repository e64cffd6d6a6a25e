"""The Triton RNN-T gradient's FastEmit term against an independent float64 construction of NeMo's numba
definition: the gradient of -log P with respect to the log-probs, its label entries scaled by 1 + lambda, taken
back through the log-softmax."""

from __future__ import annotations

import pytest
import torch
from loss_lattices import logits_grad_args
from triton_cases import random_inputs, triton_ops


def alpha_nll(log_probs, targets, frames, labels, blank):
    """-log P of one sample from its (T, U+1, V) float64 log-probs (differentiable)."""
    alpha = {}
    for t in range(frames):
        for u in range(labels + 1):
            terms = [log_probs.new_zeros(())] if t == u == 0 else []
            if t > 0:
                terms.append(alpha[t - 1, u] + log_probs[t - 1, u, blank])
            if u > 0:
                terms.append(alpha[t, u - 1] + log_probs[t, u - 1, int(targets[u - 1])])
            alpha[t, u] = torch.logsumexp(torch.stack(terms), 0)
    return -(alpha[frames - 1, labels] + log_probs[frames - 1, labels, blank])


def fastemit_reference(logits, targets, T_len, U_len, blank, fastemit_lambda):
    """(B, T, U+1, V) float64: NeMo's FastEmit logits gradient, zero outside each lattice."""
    grad = torch.zeros_like(logits, dtype=torch.float64)
    for b in range(logits.shape[0]):
        frames, labels = int(T_len[b]), int(U_len[b])
        scores = logits[b, :frames, : labels + 1].double()
        log_probs = scores.log_softmax(-1).detach().requires_grad_()
        (lp_grad,) = torch.autograd.grad(alpha_nll(log_probs, targets[b], frames, labels, blank), log_probs)
        for u in range(labels):
            lp_grad[:, u, int(targets[b, u])] *= 1 + fastemit_lambda
        softmax = scores.softmax(-1)
        grad[b, :frames, : labels + 1] = lp_grad - softmax * lp_grad.sum(-1, keepdim=True)
    return grad


@pytest.mark.parametrize("fastemit_lambda", [0.0, 0.01, 0.5])
def test_fastemit_gradient_matches_nemo_definition(fastemit_lambda):
    logits, targets, T_len, U_len = random_inputs(3, 5, 3, 6, 6, dtype=torch.float64, seed=11)
    ops = triton_ops()
    bad = torch.zeros(3, dtype=torch.bool)
    log_probs, denominators = ops.transducer_log_probs(logits, targets, T_len, U_len, 0, 6, 0, bad)
    alphas, betas, nll = ops.transducer_alphas_betas(log_probs, T_len, U_len)
    grad = torch.empty_like(logits)
    weights = torch.ones(3, dtype=torch.float64)
    stats = (log_probs, denominators, alphas, betas, nll)
    ops.transducer_logits_grad(
        *logits_grad_args(logits, stats, (targets, T_len, U_len), 0, 6, 0, weights, 0.0, grad, fastemit_lambda)
    )
    # lambda as a float32 constant under the interpreter
    torch.testing.assert_close(
        grad, fastemit_reference(logits, targets, T_len, U_len, 0, fastemit_lambda), rtol=1e-7, atol=1e-8
    )
