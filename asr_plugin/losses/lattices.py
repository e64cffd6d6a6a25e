"""The transducer lattices: ``RNNT`` and ``TDT``, each one value (checked once, when built) that says what the loss
computes and carries its three ops; the model owns it, the loss and decoding read it from the model.

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
``-log P = -(alpha(T-1, U) + b(T-1, U))``; a blank advances one frame, a label none. **FastEmit** (Yu et al.
2021, ``fastemit_lambda`` = lambda > 0) is NeMo's numba definition: the gradient w.r.t. each label log-prob
y(t, u) is (1 + lambda) times the likelihood's, the blanks' is unchanged, and the loss value is
(1 + lambda) * -log P (``RNNT.loss_values``; NeMo's numba loss returns that value too).

**TDT** (Xu et al., ICML 2023; NeMo's ``tdt`` loss): each arc also carries a duration d_i from ``durations``
(containing 0 and 1), scored by the duration head q_i(t, u) = log softmax(durations)[i]; sigma is subtracted
from every token log-prob (logit under-normalisation). A blank of duration d_i >= 1 goes to (t + d_i, u), a
label to (t + d_i, u + 1); arcs land inside the lattice except the final blank, from (t, U) with
t + d_i = T. So
``alpha(t, u) = logsumexp_i [alpha(t-d_i, u) + b(t-d_i, u) - sigma + q_i(t-d_i, u)  (d_i >= 1),
alpha(t-d_i, u-1) + y(t-d_i, u-1) - sigma + q_i(t-d_i, u-1)]`` and
``-log P = -logsumexp_{i: d_i >= 1} [alpha(T-d_i, U) + b(T-d_i, U) - sigma + q_i(T-d_i, U)]``. The kernels'
comments (``csrc/tdt.h``) give the betas and the gradient.

A lattice is stored as plain data (``record()``, read back by ``lattice_from_record``) in checkpoints and configs.
Adding one: a ``TransducerLattice`` subclass here (its fields, checks and record, its op family's argument
lists), its kernels and fake kernels, ``LATTICES[kind]``, and its greedy step in ``asr_plugin.decoding``
(docs/loss.md, "Adding a lattice").
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, NamedTuple

import torch

from ._validation import MAX_DURATIONS, Sequences
from .extension import ops_for


class LatticeStats(NamedTuple):
    """Everything the gradient needs besides the logits themselves."""

    log_probs: torch.Tensor  # (N, T, U+1, 2) acc (RNN-T) or (N, T, U+1, 2 + D) (TDT)
    denominators: torch.Tensor  # (N, T, U+1) acc (RNN-T) or (N, T, U+1, 2) (TDT: tokens, durations)
    alphas: torch.Tensor  # (N, T, U+1) acc
    betas: torch.Tensor  # (N, T, U+1) acc
    nll: torch.Tensor  # (N,) acc, -log P (the gradient kernels' likelihood; the loss value is loss_values(nll))


def _detached(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` without autograd history (a fused joint's logits have none: no detach op then)."""
    return tensor.detach() if tensor.requires_grad else tensor


def accumulation_dtype(logits_dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if logits_dtype == torch.float64 else torch.float32


def _finite_float(lattice: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise TypeError(f"{lattice}: {name} must be a finite float, got {value!r}")
    return float(value)


def _checked_clamp(lattice: str, clamp: Any) -> float | None:
    if clamp is None:
        return None
    clamp = _finite_float(lattice, "clamp", clamp)
    if not clamp > 0:
        raise ValueError(f"{lattice}: clamp must be None (no clamping) or > 0, got {clamp!r}")
    return clamp


def _checked_durations(durations: Any) -> tuple[int, ...]:
    if isinstance(durations, (str, bytes, torch.Tensor)) or not hasattr(durations, "__iter__"):
        raise TypeError(f"TDT: durations must be a list of ints such as [0, 1, 2, 3, 4], got {durations!r}")
    values = tuple(durations)
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in values):
        raise TypeError(f"TDT: durations must be ints, got {list(values)!r}")
    values = tuple(int(d) for d in values)
    if any(d < 0 for d in values) or list(values) != sorted(set(values)):
        raise ValueError(f"TDT: durations must be sorted, distinct and non-negative, got {list(values)}")
    if values[:2] != (0, 1):
        raise ValueError(
            f"TDT: durations must contain 0 and 1 (a label may stay in its frame; a blank must be able to advance one "
            f"frame), got {list(values)}"
        )
    if len(values) > MAX_DURATIONS:
        raise ValueError(f"TDT: durations: at most {MAX_DURATIONS} values, got {len(values)}")
    return values


class TransducerLattice:
    """A lattice: its parameters (the dataclass fields of a subclass), its record and its three ops.

    ``clamp`` (every lattice has it): None, or the bound each element of the token scores' gradient is clamped
    to before the upstream gradient is applied (torchaudio's and NeMo's semantics)."""

    kind: ClassVar[str]  # the record's "kind"
    _ops_prefix: ClassVar[str]  # the op family: "transducer" (RNN-T) or "tdt"
    takes_omega: ClassVar[bool] = False  # whether a loss's omega may swap in the RNN-T loss (TDT)
    _backend: ClassVar[str] = "auto"  # the kernels computing the ops; `on_backend` sets it on a call's copy
    clamp: float | None

    @property
    def num_extra_outputs(self) -> int:
        """Scores per row after the V token scores (a TDT joint's D duration scores)."""
        raise NotImplementedError

    def values_per_cell(self) -> int:
        """Accumulation-dtype values kept per lattice cell (log-probs, denominators, alpha, beta): the planner's."""
        raise NotImplementedError

    def for_call(self, omega: float) -> TransducerLattice:
        """The lattice one loss call computes (`omega`: ``check_omega``'s; TDT draws, see ``TDT.for_call``)."""
        return self

    def loss_values(self, nll: torch.Tensor) -> torch.Tensor:
        """The per-sample loss values (N,) from the lattice's -log P (N,)."""
        return nll

    def record(self) -> dict[str, Any]:
        """The lattice as plain data (``lattice_from_record`` reads it back): what checkpoints and configs hold."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return {"kind": self.kind, **{k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}}

    def _row_args(self, width: int) -> tuple:
        """The log-probs and gradient ops' arguments describing a row of `width` scores."""
        raise NotImplementedError

    def _arc_args(self) -> tuple:
        """The recursions' arguments describing the arcs."""
        raise NotImplementedError

    def _grad_args(self, width: int) -> tuple:
        """The gradient op's arguments describing the lattice, before (t_offset, weights, clamp, grad)."""
        raise NotImplementedError

    def _grad_trailing_args(self) -> tuple:
        """The gradient op's arguments after its `grad` output."""
        return ()

    def on_backend(self, backend: str) -> TransducerLattice:
        """This lattice computed by `backend`'s kernels (``backends.BACKENDS``), a copy: the kernels are a loss
        option, not part of the lattice's value, so they are in neither its record nor its equality."""
        bound = replace(self)
        object.__setattr__(bound, "_backend", backend)
        return bound

    def _op(self, device: torch.device, name: str):
        return getattr(ops_for(device, self._backend), f"{self._ops_prefix}_{name}")

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
        inplace: bool,
        t_offset: int = 0,
    ) -> torch.Tensor:
        """weights[n] * clamp(d loss[n] / d logits) for a T-chunk, in the logits dtype; zero outside valid cells.
        ``weights`` (N,) is contiguous in the accumulation dtype. With ``inplace`` the gradient overwrites the
        logits (when contiguous) and no logits-sized buffer is allocated."""
        source = _detached(logits)
        contiguous = source.contiguous()
        grad = source if inplace and contiguous is source else torch.empty_like(contiguous)
        stats_args = (stats.denominators, stats.log_probs, stats.alphas, stats.betas, stats.nll)
        lattice_args = self._grad_args(logits.shape[-1])
        clamp_arg = 0.0 if self.clamp is None else self.clamp
        op = self._op(logits.device, "logits_grad")
        op(
            contiguous,
            *stats_args,
            *sequences.tensors(),
            blank,
            *lattice_args,
            t_offset,
            weights,
            clamp_arg,
            grad,
            *self._grad_trailing_args(),
        )
        return grad


@dataclass(frozen=True)
class RNNT(TransducerLattice):
    """The RNN-T lattice (Graves 2012) over V token scores per row.

    log_probs (N, Tc, U+1, 2) [blank, label]; denominators (N, Tc, U+1).

    Args:
        clamp: None, or the gradient clamp (``TransducerLattice``).
        fastemit_lambda: FastEmit's lambda (>= 0; 0: off; NeMo suggests 1e-4 to 1e-2), NeMo's numba
            definition (module docstring): label gradients and the value scaled by (1 + lambda).
    """

    clamp: float | None = None
    fastemit_lambda: float = 0.0
    kind: ClassVar[str] = "rnnt"
    _ops_prefix: ClassVar[str] = "transducer"

    def __post_init__(self) -> None:
        object.__setattr__(self, "clamp", _checked_clamp("RNNT", self.clamp))
        fastemit_lambda = _finite_float("RNNT", "fastemit_lambda", self.fastemit_lambda)
        if fastemit_lambda < 0:
            raise ValueError(f"RNNT: fastemit_lambda must be >= 0 (0: no FastEmit), got {fastemit_lambda}")
        object.__setattr__(self, "fastemit_lambda", fastemit_lambda)

    @property
    def num_extra_outputs(self) -> int:
        return 0

    def values_per_cell(self) -> int:
        return 5  # log-probs [blank, label], denominator, alpha, beta

    def loss_values(self, nll: torch.Tensor) -> torch.Tensor:
        return nll * (1.0 + self.fastemit_lambda) if self.fastemit_lambda else nll

    def _row_args(self, width: int) -> tuple:
        return (width - self.num_extra_outputs,)  # vocab

    def _arc_args(self) -> tuple:
        return ()

    def _grad_args(self, width: int) -> tuple:
        return self._row_args(width)

    def _grad_trailing_args(self) -> tuple:
        return (self.fastemit_lambda,)


@dataclass(frozen=True)
class _TokenScoresRNNT(RNNT):
    """The RNN-T lattice over the V token scores of a TDT joint's rows; the D duration scores after them get a
    zero gradient. What a TDT loss computes instead with probability omega."""

    ignored_outputs: int = 0

    @property
    def num_extra_outputs(self) -> int:
        return self.ignored_outputs


@dataclass(frozen=True)
class TDT(TransducerLattice):
    """The TDT lattice (Xu et al., ICML 2023): V token scores then D = ``len(durations)`` duration scores per row.

    log_probs (N, Tc, U+1, 2 + D) [blank - sigma, label - sigma, q_0 .. q_{D-1}]; denominators (N, Tc, U+1, 2)
    [tokens, durations].

    Args:
        durations: the D durations in frames, sorted, distinct, starting with 0 and 1 (e.g. [0, 1, 2, 3, 4]).
        sigma: logit under-normalisation, subtracted from every token log-prob (>= 0; NeMo: 0.02-0.05).
        clamp: None, or the gradient clamp of the token scores (not of the duration scores, as NeMo's TDT loss).
    """

    durations: tuple[int, ...]
    sigma: float = 0.0
    clamp: float | None = None
    kind: ClassVar[str] = "tdt"
    _ops_prefix: ClassVar[str] = "tdt"
    takes_omega: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "durations", _checked_durations(self.durations))
        sigma = _finite_float("TDT", "sigma", self.sigma)
        if sigma < 0:
            raise ValueError(
                f"TDT: sigma (logit under-normalisation, subtracted from the token log-probs) must be >= 0, got {sigma}"
            )
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "clamp", _checked_clamp("TDT", self.clamp))

    @property
    def num_extra_outputs(self) -> int:
        return len(self.durations)

    def values_per_cell(self) -> int:
        return 6 + len(self.durations)  # log-probs [blank, label, D durations], two denominators, alpha, beta

    def for_call(self, omega: float) -> TransducerLattice:
        """With probability `omega` the call computes the standard RNN-T loss over the token scores instead
        (blank advancing one frame, no sigma; the duration scores get a zero gradient), as NeMo's TDT loss does:
        one draw per call, for the whole batch, from torch's default CPU generator (seeded by
        ``torch.manual_seed``; no device sync)."""
        if omega > 0 and torch.rand(()).item() < omega:
            return _TokenScoresRNNT(clamp=self.clamp, ignored_outputs=len(self.durations))
        return self

    def _row_args(self, width: int) -> tuple:
        return (len(self.durations), self.sigma)

    def _arc_args(self) -> tuple:
        return (list(self.durations),)

    def _grad_args(self, width: int) -> tuple:
        return self._arc_args()


# Every lattice by its record's "kind".
LATTICES: dict[str, type[TransducerLattice]] = {"rnnt": RNNT, "tdt": TDT}


def loss_lattice(lattice: TransducerLattice | Mapping[str, Any] | None) -> TransducerLattice:
    """A loss's `lattice` argument: a lattice, its record (a config node's) or None (``RNNT()``)."""
    return RNNT() if lattice is None else lattice_from_record(lattice, "lattice")


def check_omega(lattice: TransducerLattice, omega: Any) -> float:
    """A loss's omega (the probability of the RNN-T loss instead of the lattice's) as a float in [0, 1]; only a
    lattice that ``takes_omega`` (TDT) may have one above 0."""
    omega = _finite_float("loss", "omega", omega)
    if not 0 <= omega <= 1:
        raise ValueError(f"omega (the probability of the RNN-T loss instead of TDT) must be in [0, 1], got {omega}")
    if omega and not lattice.takes_omega:
        raise ValueError(
            f"omega = {omega} applies to the TDT lattice only, the loss's lattice is {lattice!r}: set omega=0.0"
        )
    return omega


def lattice_from_record(record: Mapping[str, Any] | TransducerLattice, key: str = "lattice") -> TransducerLattice:
    """The lattice of a record (``{"kind": "rnnt", "clamp": None, "fastemit_lambda": 0.0}``, ``{"kind": "tdt",
    "durations": [0, 1, 2], "sigma": 0.02, "clamp": None}``; omitted parameters take their defaults) or a lattice
    itself. Only the classes of ``LATTICES`` are built; ValueError/TypeError names `key` and what is wrong."""
    if isinstance(record, TransducerLattice):
        return record
    if not isinstance(record, Mapping):
        raise TypeError(
            f"{key} must be a lattice such as RNNT() or TDT([0, 1, 2, 3, 4]), or its record such as "
            f"{{'kind': 'rnnt'}}, got {record!r}"
        )
    values = dict(record)
    kind = values.pop("kind", None)
    if kind not in LATTICES:
        raise ValueError(f"{key}.kind = {kind!r}: one of {sorted(LATTICES)}")
    lattice_class = LATTICES[kind]
    known = {f.name for f in fields(lattice_class) if f.init}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{key}: {unknown} are not parameters of the {kind} lattice ({sorted(known)})")
    try:
        return lattice_class(**values)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{key}: {err}") from None
