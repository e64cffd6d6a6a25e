"""The loss options as one value, checked once when built and passed down unchanged, as a lattice is (``lattices``).

``LossOptions``: what both loss modes take besides the lattice's own parameters (the lattice, blank, reduction,
TDT's omega, the kernels); ``SamplewiseOptions`` adds the sample-wise loss's (its memory budget, group size and
flash joint). ``TransducerLoss`` builds one when it is built, the functional entries (``transducer_loss``,
``samplewise_transducer_loss``, ``plan_samplewise``) for their direct callers; the engines, the planner, the
runner choice and the NeMo integration read it and never check it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ._validation import check_options
from .backends import check_backend
from .lattices import TransducerLattice, check_omega, loss_lattice
from .planning import parse_max_samples, parse_memory_budget

# The sample-wise loss's `flash_joint` option: "auto" runs the flash joint when it can (CUDA tensors, see
# ``runner_choice.choose_flash``), "always" requires it (a ValueError naming why it cannot run), "never" runs
# the fused or graph runner.
FLASH_JOINT_CHOICES = ("auto", "always", "never")


@dataclass(frozen=True)
class LossOptions:
    """The options of a transducer loss call, checked when built (ValueError/TypeError naming the option).

    Args:
        lattice: ``RNNT(clamp=None, fastemit_lambda=0.0)`` or ``TDT(durations, sigma=0.0, clamp=None)``, or its
            record (``lattice_from_record``); None: ``RNNT()``. Stored as the lattice.
        blank: the blank token id (an int).
        reduction: "none" (the (B,) losses), "sum" or "mean" (over the batch, as torchaudio).
        omega: TDT only: the probability that a call computes the standard RNN-T loss over the token scores
            instead (``TDT.for_call``); 0 makes the loss deterministic.
        backend: the kernels, "auto" (C++ on CPU tensors, Triton on CUDA tensors), "cpp", "triton" or "cuda"
            (``backends``); not part of the lattice: the same lattice on any kernels.
    """

    lattice: TransducerLattice | Mapping[str, Any] | None = None  # a lattice once built
    blank: int = 0
    reduction: str = "mean"
    omega: float = 0.0
    backend: str = "auto"

    def __post_init__(self) -> None:
        check_options(self.blank, self.reduction)
        object.__setattr__(self, "lattice", loss_lattice(self.lattice))
        object.__setattr__(self, "omega", check_omega(self.lattice, self.omega))
        object.__setattr__(self, "backend", check_backend(self.backend))

    def arguments(self) -> dict:
        """The options as keyword arguments (``TransducerLoss(mode, **options.arguments())`` rebuilds them)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True)
class SamplewiseOptions(LossOptions):
    """``LossOptions`` and the sample-wise loss's own (ignored by the batched loss).

    Args:
        memory_budget: bytes (int) or a string like "512MiB"/"2GB" bounding the transient memory of one step;
            stored as bytes. None: 1 GiB on CUDA, 256 MiB on CPU (fixed, so every step and DDP rank plans alike).
        max_samples_per_group: at most this many samples per step (None: as many as fit the budget).
        flash_joint: whether a standard joint runs as the flash joint (``losses.flash``: no logits tensor):
            "auto" on CUDA tensors when it can, "always" (a ValueError naming why it cannot; on the CPU only under
            ``TRITON_INTERPRET=1``), "never".
    """

    memory_budget: int | str | None = None  # bytes once built
    max_samples_per_group: int | None = None
    flash_joint: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "memory_budget", parse_memory_budget(self.memory_budget))
        object.__setattr__(self, "max_samples_per_group", parse_max_samples(self.max_samples_per_group))
        if self.flash_joint not in FLASH_JOINT_CHOICES:
            raise ValueError(f"flash_joint must be one of {FLASH_JOINT_CHOICES}, got {self.flash_joint!r}")
