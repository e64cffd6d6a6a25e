"""An independent float64 reference of the TDT loss (Xu et al., ICML 2023), for the tests: a plain Python
lattice recursion, differentiable by autograd, written as a forward "push" over the paths (each cell sends its
mass along its arcs) rather than the kernels' "pull" over incoming arcs."""

from __future__ import annotations

import torch


def tdt_reference_nll(logits, targets, logit_lengths, target_lengths, blank, durations, sigma=0.0):
    """Per-sample -log P(y | x) of the TDT lattice, float64.

    logits (B, T, U+1, V + D): V token scores, then D duration scores. A path starts at (0, 0); from (t, u) it
    emits blank with duration d >= 1 to (t + d, u), or label y_u with any duration d to (t + d, u + 1); every
    emission scores log softmax(tokens) - sigma + log softmax(durations)[d]. Only the state (T_b, U_b),
    reached by a blank, ends a path; an emission that would land past T_b, or at T_b elsewhere, is impossible.
    """
    num_durations = len(durations)
    tokens = logits[..., : logits.shape[-1] - num_durations].double().log_softmax(-1) - sigma
    duration_scores = logits[..., logits.shape[-1] - num_durations :].double().log_softmax(-1)
    losses = []
    for b in range(logits.shape[0]):
        frames, labels = int(logit_lengths[b]), int(target_lengths[b])
        mass = {(0, 0): [tokens.new_zeros(())]}  # (t, u) -> log-masses arriving there
        for t in range(frames):
            for u in range(labels + 1):
                if (t, u) not in mass:
                    continue
                here = torch.logsumexp(torch.stack(mass[(t, u)]), 0)
                for i, d in enumerate(durations):
                    ends = t + d == frames and u == labels
                    if d >= 1 and (t + d < frames or ends):
                        score = tokens[b, t, u, blank] + duration_scores[b, t, u, i]
                        mass.setdefault((t + d, u), []).append(here + score)
                    if u < labels and t + d < frames:
                        score = tokens[b, t, u, int(targets[b, u])] + duration_scores[b, t, u, i]
                        mass.setdefault((t + d, u + 1), []).append(here + score)
        losses.append(-torch.logsumexp(torch.stack(mass[(frames, labels)]), 0))
    return torch.stack(losses)
