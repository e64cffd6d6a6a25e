"""Every Triton op against the C++ op of the same name (both lattices, every logits dtype, T-chunks, in-place
gradients, clamp, per-sample weights, U = 0, T = 1, non-finite rows)."""

from __future__ import annotations

import pytest
import torch
from loss_lattices import logits_grad_args
from triton_cases import DTYPES, cpp_ops, random_inputs, tolerance, triton_ops

RNNT_SHAPES = [  # (B, T, U, V, blank)
    (3, 5, 3, 7, 0),
    (2, 1, 3, 5, 2),  # T = 1
    (2, 4, 0, 6, 5),  # U = 0, blank = V - 1
    (2, 3, 2, 300, 0),  # V wider than one tile (several column tiles)
]
TDT_CASES = [  # (B, T, U, V, durations, sigma, blank)
    (3, 6, 3, 6, [0, 1, 2, 4], 0.05, 0),
    (2, 1, 2, 5, [0, 1, 2], 0.0, 1),  # T = 1
    (2, 4, 0, 5, [0, 1, 2, 3, 4], 0.02, 4),  # U = 0
    (2, 3, 2, 5, [0, 1, 2, 3, 4, 5, 6, 7], 0.0, 0),  # durations longer than T
]


def run_ops(ops, family, logits, lattice, blank, row, arcs, grad_row, weights, clamp, t_chunks, inplace, trailing=()):
    """All three ops of `family` ("transducer": RNN-T, or "tdt") over T-chunks of the logits, as the sample-wise
    engine calls them: `row` the log-probs op's row arguments, `arcs` the recursions', `grad_row` and `trailing`
    the gradient op's (``logits_grad_args``)."""
    bad = torch.zeros(logits.shape[0], dtype=torch.bool)
    log_probs_op = getattr(ops, f"{family}_log_probs")
    pieces = [log_probs_op(logits[:, t0:t1].contiguous(), *lattice, blank, *row, t0, bad) for t0, t1 in t_chunks]
    log_probs, denominators = (torch.cat(part, 1) for part in zip(*pieces))
    alphas, betas, nll = getattr(ops, f"{family}_alphas_betas")(log_probs, *lattice[1:], *arcs)
    stats = (log_probs, denominators, alphas, betas, nll)
    grads = []
    for t0, t1 in t_chunks:
        chunk = logits[:, t0:t1].contiguous()
        grad = chunk if inplace else torch.empty_like(chunk)
        args = logits_grad_args(chunk, stats, lattice, blank, grad_row, t0, weights, clamp, grad, *trailing)
        getattr(ops, f"{family}_logits_grad")(*args)
        grads.append(grad)
    return dict(zip(("log_probs", "denominators", "alphas", "betas", "nll"), stats), grad=torch.cat(grads, 1), bad=bad)


def run_rnnt(ops, logits, targets, T_len, U_len, blank, vocab, weights, clamp, t_chunks, inplace, fastemit=0.0):
    lattice = (targets, T_len, U_len)
    return run_ops(
        ops, "transducer", logits, lattice, blank, (vocab,), (), vocab, weights, clamp, t_chunks, inplace, (fastemit,)
    )


def run_tdt(ops, logits, targets, T_len, U_len, blank, durations, sigma, weights, clamp, t_chunks, inplace):
    row = (len(durations), sigma)
    lattice = (targets, T_len, U_len)
    return run_ops(ops, "tdt", logits, lattice, blank, row, (durations,), durations, weights, clamp, t_chunks, inplace)


def assert_same(ours: dict, expected: dict, dtype: torch.dtype) -> None:
    for name, value in expected.items():
        if value.dtype == torch.bool:
            assert torch.equal(ours[name], value), name
        else:
            torch.testing.assert_close(
                ours[name].double(), value.double(), **tolerance(dtype), msg=lambda m: f"{name}: {m}"
            )


def chunks_of(frames: int, chunk: int) -> list[tuple[int, int]]:
    return [(t0, min(t0 + chunk, frames)) for t0 in range(0, frames, chunk)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", RNNT_SHAPES)
def test_rnnt_ops_match_cpp(shape, dtype):
    batch, frames, labels, vocab, blank = shape
    logits, targets, T_len, U_len = random_inputs(batch, frames, labels, vocab, vocab, blank, dtype, seed=sum(shape))
    weights = torch.linspace(0.5, 2.0, batch, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    args = (targets, T_len, U_len, blank, vocab, weights, 0.0, chunks_of(frames, 2))
    ours = run_rnnt(triton_ops(), logits.clone(), *args, inplace=True)
    expected = run_rnnt(cpp_ops(), logits.clone(), *args, inplace=False)
    assert_same(ours, expected, dtype)


def test_rnnt_clamp_and_extra_columns_match_cpp():
    """clamp, and a TDT-shaped row scored as RNN-T (the columns past `vocab` get a zero gradient)."""
    logits, targets, T_len, U_len = random_inputs(3, 5, 3, 9, 6, seed=7)
    weights = torch.tensor([1.0, 0.5, 3.0])
    args = (targets, T_len, U_len, 0, 6, weights, 0.05, [(0, 5)])
    ours = run_rnnt(triton_ops(), logits, *args, inplace=False)
    assert_same(ours, run_rnnt(cpp_ops(), logits, *args, inplace=False), torch.float32)
    assert ours["grad"][..., 6:].abs().max() == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", TDT_CASES)
def test_tdt_ops_match_cpp(case, dtype):
    batch, frames, labels, vocab, durations, sigma, blank = case
    logits, targets, T_len, U_len = random_inputs(
        batch, frames, labels, vocab + len(durations), vocab, blank, dtype, seed=frames + labels
    )
    weights = torch.linspace(0.5, 2.0, batch, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    args = (targets, T_len, U_len, blank, durations, sigma, weights, 0.1, chunks_of(frames, 3))
    ours = run_tdt(triton_ops(), logits.clone(), *args, inplace=True)
    expected = run_tdt(cpp_ops(), logits.clone(), *args, inplace=False)
    assert_same(ours, expected, dtype)


@pytest.mark.parametrize("poison", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rows_are_flagged_as_cpp_does(poison):
    """A NaN or +inf score, or a row of -inf, in a valid cell flags its sample; padding never does."""
    logits, targets, T_len, U_len = random_inputs(3, 4, 2, 5, 5, seed=3)
    T_len[1] = 2
    logits[0, 1, 1, 3] = poison
    logits[1, 3, 0, :] = poison  # a padded frame of sample 1
    logits[2, 0, 0, :] = poison
    for name, ops in (("triton", triton_ops()), ("cpp", cpp_ops())):
        bad = torch.zeros(3, dtype=torch.bool)
        ops.transducer_log_probs(logits, targets, T_len, U_len, 0, 5, 0, bad)
        tdt_bad = torch.zeros(3, dtype=torch.bool)
        ops.tdt_log_probs(logits, targets, T_len, U_len, 0, 2, 0.0, 0, tdt_bad)
        if name == "triton":
            ours, ours_tdt = bad, tdt_bad
    assert torch.equal(ours, bad) and torch.equal(ours_tdt, tdt_bad)
    assert ours[2] and not ours[1]
