"""The transducer lattices the loss engine computes over: RNN-T and TDT, each a description plus its three ops.

Both engines (batched, sample-wise) run the same three steps on a (T-chunk of a) joint output and never look
inside a lattice:

1. ``log_probs(logits, ...)``: the fused log-softmax of a chunk, keeping only what the recursions read (a few
   values per cell) and the row denominators (for the gradient); flags non-finite samples;
2. ``recursions(log_probs, denominators, ...)``: alphas, betas and nll = -beta(0, 0) over whole lattices;
3. ``logits_grad(logits, stats, ...)``: the logits gradient of a chunk, in place when asked.

Shapes: logits (N, Tc, U+1, W) cover frames [t_offset, t_offset + Tc) of an (N, T, U+1) lattice; W = V token
scores followed by ``num_extra_outputs`` other scores (a TDT joint's D duration scores). Every other per-cell
tensor covers the whole lattice, in the accumulation dtype (float32; float64 for float64 logits).

**RNN-T** (Graves 2012). With y(t, u) = log softmax(tokens)[y_u] and b(t, u) = log softmax(tokens)[blank]:
``alpha(t, u) = logaddexp(alpha(t-1, u) + b(t-1, u), alpha(t, u-1) + y(t, u-1))``, alpha(0, 0) = 0,
``-log P = -(alpha(T-1, U) + b(T-1, U))``; a blank advances one frame, a label none.

**TDT** (Xu et al., ICML 2023; NeMo's ``tdt`` loss): each arc also carries a duration d_i from ``durations``
(containing 0 and 1), scored by the duration head q_i(t, u) = log softmax(durations)[i]; sigma is subtracted
from every token log-prob (logit under-normalisation). A blank of duration d_i >= 1 goes to (t + d_i, u), a
label to (t + d_i, u + 1); arcs land inside the lattice except the final blank, from (t, U) with
t + d_i = T. So
``alpha(t, u) = logsumexp_i [alpha(t-d_i, u) + b(t-d_i, u) - sigma + q_i(t-d_i, u)  (d_i >= 1),
alpha(t-d_i, u-1) + y(t-d_i, u-1) - sigma + q_i(t-d_i, u-1)]`` and
``-log P = -logsumexp_{i: d_i >= 1} [alpha(T-d_i, U) + b(T-d_i, U) - sigma + q_i(T-d_i, U)]``. The kernels'
comments (``csrc/tdt.h``) give the betas and the gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from ._validation import Sequences
from .extension import ops_for


class LatticeStats(NamedTuple):
    """Everything the gradient needs besides the logits themselves."""

    log_probs: torch.Tensor  # (N, T, U+1, 2) acc (RNN-T) or (N, T, U+1, 2 + D) (TDT)
    denominators: torch.Tensor  # (N, T, U+1) acc (RNN-T) or (N, T, U+1, 2) (TDT: tokens, durations)
    alphas: torch.Tensor  # (N, T, U+1) acc
    betas: torch.Tensor  # (N, T, U+1) acc
    nll: torch.Tensor  # (N,) acc


def _detached(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` without autograd history (a fused joint's logits have none: no detach op then)."""
    return tensor.detach() if tensor.requires_grad else tensor


def accumulation_dtype(logits_dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if logits_dtype == torch.float64 else torch.float32


class TransducerLattice:
    """A lattice's three ops; subclasses (``RNNT``, ``TDT``) name their op family and its lattice arguments."""

    _ops_prefix: str  # "transducer" (RNN-T) or "tdt"
    num_extra_outputs: int  # scores per row after the V token scores

    def values_per_cell(self) -> int:
        """Accumulation-dtype values kept per lattice cell (log-probs, denominators, alpha, beta): the planner's."""
        raise NotImplementedError

    def _row_args(self, width: int) -> tuple:
        """The log-probs and gradient ops' arguments describing a row of `width` scores."""
        raise NotImplementedError

    def _arc_args(self) -> tuple:
        """The recursions' arguments describing the arcs."""
        raise NotImplementedError

    def _grad_args(self, width: int) -> tuple:
        """The gradient op's arguments describing the lattice."""
        raise NotImplementedError

    backend: str  # backends.BACKENDS: which kernels compute the ops

    def _op(self, device: torch.device, name: str):
        return getattr(ops_for(device, self.backend), f"{self._ops_prefix}_{name}")

    def log_probs(
        self, logits: torch.Tensor, sequences: Sequences, blank: int, bad: torch.Tensor, t_offset: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log_probs, denominators) of a T-chunk (layouts: the subclasses); sets ``bad[n]`` (N,) bool, a
        contiguous view, for a sample with a non-finite valid row (never clears it)."""
        op = self._op(logits.device, "log_probs")
        width = logits.shape[-1]
        return op(_detached(logits).contiguous(), *sequences.tensors(), blank, *self._row_args(width), t_offset, bad)

    def recursions(self, log_probs: torch.Tensor, denominators: torch.Tensor, sequences: Sequences) -> LatticeStats:
        """Alphas, betas and nll over whole lattices (from every chunk's log-probs)."""
        op = self._op(log_probs.device, "alphas_betas")
        alphas, betas, nll = op(log_probs, *sequences.tensors()[1:], *self._arc_args())
        return LatticeStats(log_probs, denominators, alphas, betas, nll)

    def logits_grad(
        self,
        logits: torch.Tensor,
        stats: LatticeStats,
        sequences: Sequences,
        blank: int,
        weights: torch.Tensor,
        clamp: float | None,
        inplace: bool,
        t_offset: int = 0,
    ) -> torch.Tensor:
        """weights[n] * clamp(d nll[n] / d logits) for a T-chunk, in the logits dtype; zero outside valid cells.
        ``weights`` (N,) is contiguous in the accumulation dtype. With ``inplace`` the gradient overwrites the
        logits (when contiguous) and no logits-sized buffer is allocated."""
        source = _detached(logits)
        contiguous = source.contiguous()
        grad = source if inplace and contiguous is source else torch.empty_like(contiguous)
        stats_args = (stats.denominators, stats.log_probs, stats.alphas, stats.betas, stats.nll)
        lattice_args = self._grad_args(logits.shape[-1])
        clamp_arg = 0.0 if clamp is None else float(clamp)
        op = self._op(logits.device, "logits_grad")
        op(contiguous, *stats_args, *sequences.tensors(), blank, *lattice_args, t_offset, weights, clamp_arg, grad)
        return grad


@dataclass(frozen=True)
class RNNT(TransducerLattice):
    """The RNN-T lattice over the first V = W - ``num_extra_outputs`` scores of each row; the others (a TDT
    joint's duration scores, when the TDT loss falls back to RNN-T) get a zero gradient.

    log_probs (N, Tc, U+1, 2) [blank, label]; denominators (N, Tc, U+1)."""

    num_extra_outputs: int = 0
    backend: str = "auto"
    _ops_prefix = "transducer"

    def values_per_cell(self) -> int:
        return 5  # log-probs [blank, label], denominator, alpha, beta

    def _row_args(self, width: int) -> tuple:
        return (width - self.num_extra_outputs,)  # vocab

    def _arc_args(self) -> tuple:
        return ()

    def _grad_args(self, width: int) -> tuple:
        return self._row_args(width)


@dataclass(frozen=True)
class TDT(TransducerLattice):
    """The TDT lattice: V token scores then D = ``len(durations)`` duration scores per row. ``clamp`` applies to
    the token scores' gradient only (as NeMo's TDT loss), not to the duration scores'.

    log_probs (N, Tc, U+1, 2 + D) [blank - sigma, label - sigma, q_0 .. q_{D-1}]; denominators (N, Tc, U+1, 2)
    [tokens, durations]."""

    durations: tuple[int, ...]
    sigma: float = 0.0
    backend: str = "auto"
    _ops_prefix = "tdt"

    @property
    def num_extra_outputs(self) -> int:
        return len(self.durations)

    def values_per_cell(self) -> int:
        return 6 + len(self.durations)  # log-probs [blank, label, D durations], two denominators, alpha, beta

    def _row_args(self, width: int) -> tuple:
        return (len(self.durations), self.sigma)

    def _arc_args(self) -> tuple:
        return (list(self.durations),)

    def _grad_args(self, width: int) -> tuple:
        return self._arc_args()


def loss_lattice(
    durations: tuple[int, ...] | None, sigma: float, omega: float, backend: str = "auto"
) -> TransducerLattice:
    """The lattice of one loss call: RNN-T when `durations` is None, else TDT, except that with probability
    `omega` the call computes the standard RNN-T loss over the token scores instead (blank advancing one frame,
    no sigma; the duration scores get a zero gradient), as NeMo's TDT loss does: one draw per call, for the whole
    batch, here from torch's default CPU generator (seeded by ``torch.manual_seed``; no device sync). `backend`
    chooses the kernels (``backends``)."""
    if durations is None:
        return RNNT(backend=backend)
    if omega > 0 and torch.rand(()).item() < omega:
        return RNNT(num_extra_outputs=len(durations), backend=backend)
    return TDT(durations, float(sigma), backend)
