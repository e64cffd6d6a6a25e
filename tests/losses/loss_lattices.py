"""Random lattices shared by the loss tests, and the gradient ops' argument list (a module of its own, not
conftest.py, so test files can import it by a name no other test directory uses)."""

import torch


def random_lattice(batch, frames, labels, vocab, blank, generator, full_lengths=False):
    """targets (B, U) avoiding blank, and lengths with the first sample at the full T and U."""
    labels_only = torch.tensor([v for v in range(vocab) if v != blank])
    targets = labels_only[torch.randint(len(labels_only), (batch, labels), generator=generator)]
    logit_lengths = torch.randint(1, frames + 1, (batch,), generator=generator)
    target_lengths = torch.randint(0, labels + 1, (batch,), generator=generator)
    if full_lengths:
        logit_lengths[:] = frames
        target_lengths[:] = labels
    logit_lengths[0], target_lengths[0] = frames, labels
    return targets, logit_lengths, target_lengths


def make_tdt_problem(batch, frames, labels, vocab, durations, blank=0, dtype=torch.float64, seed=0, full_lengths=False):
    """logits (B, T, U+1, V + D), targets and lengths (the first sample at the full T and U)."""
    generator = torch.Generator().manual_seed(seed)
    width = vocab + len(durations)
    logits = torch.randn(batch, frames, labels + 1, width, generator=generator, dtype=torch.float64).to(dtype)
    targets, logit_lengths, target_lengths = random_lattice(
        batch, frames, labels, vocab, blank, generator, full_lengths
    )
    return logits.requires_grad_(), targets, logit_lengths, target_lengths


def logits_grad_args(logits, stats, lattice, blank, row, t_offset, weights, clamp, grad, *trailing) -> tuple:
    """The arguments of a logits-gradient op (``transducer_logits_grad``, ``tdt_logits_grad``) in its schema's
    order (``csrc/transducer.cpp``, ``csrc/tdt.cpp``).

    Args:
        stats: (log_probs, denominators, alphas, betas, nll), as the log-probs and recursion ops return them
            (``LatticeStats``'s order).
        lattice: (targets, logit_lengths, target_lengths).
        row: V (RNN-T) or the durations (TDT).
        trailing: RNN-T's fastemit_lambda.
    """
    log_probs, denominators, alphas, betas, nll = stats
    return (
        logits,
        denominators,
        log_probs,
        alphas,
        betas,
        nll,
        *lattice,
        blank,
        row,
        t_offset,
        weights,
        clamp,
        grad,
        *trailing,
    )
