"""Shared fixtures of the loss tests: an independent float64 reference and random lattice problems."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from loss_joints import TanhJoint
from loss_lattices import random_lattice


def reference_nll(logits, targets, logit_lengths, target_lengths, blank):
    """Per-sample -log P(y | x) by plain loops over each lattice in float64 (differentiable by autograd).

    alpha(t, u) = logaddexp(alpha(t-1, u) + log p(blank | t-1, u), alpha(t, u-1) + log p(y_u | t, u-1))
    and -log P = -(alpha(T-1, U) + log p(blank | T-1, U)).
    """
    log_probs = logits.double().log_softmax(-1)
    losses = []
    for b in range(logits.shape[0]):
        frames, labels = int(logit_lengths[b]), int(target_lengths[b])
        alpha = [[None] * (labels + 1) for _ in range(frames)]
        for t in range(frames):
            for u in range(labels + 1):
                terms = [log_probs.new_zeros(())] if t == 0 and u == 0 else []
                if t > 0:
                    terms.append(alpha[t - 1][u] + log_probs[b, t - 1, u, blank])
                if u > 0:
                    terms.append(alpha[t][u - 1] + log_probs[b, t, u - 1, int(targets[b, u - 1])])
                alpha[t][u] = torch.logsumexp(torch.stack(terms), 0)
        losses.append(-(alpha[frames - 1][labels] + log_probs[b, frames - 1, labels, blank]))
    return torch.stack(losses)


@dataclass
class Problem:
    """A random padded batch: logits (B, T, U+1, V), targets (B, U), lengths (B,)."""

    logits: torch.Tensor
    targets: torch.Tensor
    logit_lengths: torch.Tensor
    target_lengths: torch.Tensor
    blank: int

    def args(self):
        return self.logits, self.targets, self.logit_lengths, self.target_lengths


@pytest.fixture
def make_problem():
    def make(batch=3, frames=6, labels=4, vocab=7, blank=0, dtype=torch.float32, seed=0, full_lengths=False):
        generator = torch.Generator().manual_seed(seed)
        logits = torch.randn(batch, frames, labels + 1, vocab, generator=generator, dtype=torch.float64).to(dtype)
        targets, logit_lengths, target_lengths = random_lattice(
            batch, frames, labels, vocab, blank, generator, full_lengths
        )
        return Problem(logits.requires_grad_(), targets, logit_lengths, target_lengths, blank)

    return make


@pytest.fixture
def reference():
    return reference_nll


@dataclass
class JointProblem:
    """encoder_out (B, T, H_e), predictor_out (B, U+1, H_p), a TanhJoint and a lattice."""

    encoder_out: torch.Tensor
    predictor_out: torch.Tensor
    joint: TanhJoint
    targets: torch.Tensor
    logit_lengths: torch.Tensor
    target_lengths: torch.Tensor
    blank: int

    def lattice(self):
        return self.targets, self.logit_lengths, self.target_lengths


@pytest.fixture
def make_joint_problem():
    def make(batch=5, frames=9, labels=4, vocab=8, hidden=6, blank=0, dtype=torch.float32, seed=0, num_extra_outputs=0):
        """`vocab` token scores (then `num_extra_outputs` more, e.g. TDT durations) per cell."""
        generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        joint = TanhJoint(hidden, hidden + 1, hidden + 2, vocab, num_extra_outputs).to(dtype)
        encoder_out = torch.randn(batch, frames, hidden, generator=generator, dtype=dtype).requires_grad_()
        predictor_out = torch.randn(batch, labels + 1, hidden + 1, generator=generator, dtype=dtype).requires_grad_()
        targets, logit_lengths, target_lengths = random_lattice(batch, frames, labels, vocab, blank, generator)
        return JointProblem(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, blank)

    return make
