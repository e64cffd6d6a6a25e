"""FastEmit's float64 reference (a module of its own, so the FastEmit tests and the NeMo comparison share it)."""

import torch


def fastemit_reference(logits, targets, logit_lengths, target_lengths, blank, fastemit_lambda, clamp=None):
    """Per-sample values (B,) and d sum(values) / d logits of the RNN-T loss with FastEmit as NeMo's numba loss
    defines it, in float64 by plain loops: value (1 + lambda) * -log P; gradient w.r.t. the log-probs -P(arc) / P
    for a blank arc and -(1 + lambda) P(arc) / P for a label arc, taken through the log-softmax by autograd,
    then clamped to [-clamp, clamp]."""
    logits = logits.detach().double().requires_grad_()
    log_probs = logits.log_softmax(-1)  # (B, T, U+1, V)
    lp = log_probs.detach()
    lp_grad = torch.zeros_like(lp)
    values = []
    for b in range(logits.shape[0]):
        frames, labels = int(logit_lengths[b]), int(target_lengths[b])
        y = [int(targets[b, u]) for u in range(labels)]
        alpha = torch.full((frames, labels + 1), float("-inf"), dtype=torch.float64)
        beta = torch.full((frames, labels + 1), float("-inf"), dtype=torch.float64)
        for t in range(frames):
            for u in range(labels + 1):
                terms = [torch.zeros((), dtype=torch.float64)] if t == u == 0 else []
                if t > 0:
                    terms.append(alpha[t - 1, u] + lp[b, t - 1, u, blank])
                if u > 0:
                    terms.append(alpha[t, u - 1] + lp[b, t, u - 1, y[u - 1]])
                alpha[t, u] = torch.logsumexp(torch.stack(terms), 0)
        for t in reversed(range(frames)):
            for u in reversed(range(labels + 1)):
                terms = [lp[b, t, u, blank]] if (t, u) == (frames - 1, labels) else []
                if t + 1 < frames:
                    terms.append(beta[t + 1, u] + lp[b, t, u, blank])
                if u < labels:
                    terms.append(beta[t, u + 1] + lp[b, t, u, y[u]])
                beta[t, u] = torch.logsumexp(torch.stack(terms), 0)
        log_likelihood = beta[0, 0]
        for t in range(frames):
            for u in range(labels + 1):
                if t + 1 < frames:
                    lp_grad[b, t, u, blank] = -torch.exp(
                        alpha[t, u] + lp[b, t, u, blank] + beta[t + 1, u] - log_likelihood
                    )
                if u < labels:
                    arc = torch.exp(alpha[t, u] + lp[b, t, u, y[u]] + beta[t, u + 1] - log_likelihood)
                    lp_grad[b, t, u, y[u]] = -(1.0 + fastemit_lambda) * arc
        last = (frames - 1, labels)
        lp_grad[b, last[0], last[1], blank] = -torch.exp(alpha[last] + lp[b, last[0], last[1], blank] - log_likelihood)
        values.append(-(1.0 + fastemit_lambda) * log_likelihood)
    (grad,) = torch.autograd.grad(log_probs, logits, lp_grad)
    if clamp is not None:
        grad = grad.clamp(-clamp, clamp)
    return torch.stack(values), grad
