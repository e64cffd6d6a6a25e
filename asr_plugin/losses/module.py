"""``TransducerLoss``: one nn.Module call signature for both loss modes, as used by the model code."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import torch
from torch import nn

from .batched import batched_loss
from .engine import SamplewiseState
from .lattices import TransducerLattice
from .options import SamplewiseOptions
from .planning import Plan
from .runners import Joint, check_extra_outputs
from .samplewise import samplewise_loss, samplewise_plan

MODES = ("batched", "samplewise")
OPTION_NAMES = frozenset(field.name for field in fields(SamplewiseOptions))
_logger = logging.getLogger(__name__)


class TransducerLoss(nn.Module):
    """Transducer loss over (encoder_out, predictor_out, joint) on `lattice`: ``RNNT(...)`` (None: ``RNNT()``) or
    ``TDT(durations, ...)``, whose parameters (clamp, FastEmit, durations, sigma) are the lattice's own.

    mode="batched" materialises ``joint(encoder_out, predictor_out)`` (B, T, U+1, V) (TDT: V + D) and computes
    ``batched_loss`` over it; mode="samplewise" computes ``samplewise_loss``, group by group within the memory
    budget. A model's loss takes the model's lattice (``TransducerLoss(mode, lattice=model.lattice)``; the
    training module does it).

    The other arguments are the options of ``SamplewiseOptions`` (documented there: blank, reduction, omega,
    backend, and the sample-wise loss's memory_budget, max_samples_per_group and flash_joint, which batched mode
    ignores), checked once, here, into one value (``options``) that every call passes down; they read back as
    the module's attributes too (``loss_fn.lattice``, ``loss_fn.memory_budget``, ...).

    Sample-wise, the module keeps its state across calls: the fp16 gradient scale (lowered after an overflow,
    then kept) and the plan of the last call (``last_plan``; its first plan is logged at INFO on
    ``asr_plugin.losses.module``, later ones at DEBUG). ``plan(...)`` gives the plan of a call without running it.
    """

    def __init__(
        self,
        mode: str = "batched",
        lattice: TransducerLattice | Mapping[str, Any] | None = None,
        blank: int = 0,
        reduction: str = "mean",
        omega: float = 0.0,
        memory_budget: int | str | None = None,
        max_samples_per_group: int | None = None,
        backend: str = "auto",
        flash_joint: str = "auto",
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.options = SamplewiseOptions(
            lattice=lattice,
            blank=blank,
            reduction=reduction,
            omega=omega,
            backend=backend,
            memory_budget=memory_budget,
            max_samples_per_group=max_samples_per_group,
            flash_joint=flash_joint,
        )
        self.samplewise_state = SamplewiseState()

    def __getattr__(self, name: str) -> Any:
        """An option read as an attribute (``loss_fn.lattice``), else ``nn.Module``'s own lookup."""
        options = self.__dict__.get("options")
        if options is not None and name in OPTION_NAMES:
            return getattr(options, name)
        return super().__getattr__(name)

    @property
    def last_plan(self) -> Plan | None:
        """The plan of the last sample-wise call (None before the first)."""
        return self.samplewise_state.last_plan

    def extra_repr(self) -> str:
        options = ", ".join(f"{name}={value!r}" for name, value in self.options.arguments().items())
        return f"mode={self.mode!r}, {options}"

    def plan(
        self,
        encoder_out: torch.Tensor,  # (B, T, H_e)
        predictor_out: torch.Tensor,  # (B, U+1, H_p)
        joint: Joint,
        targets: torch.Tensor,  # (B, U)
        logit_lengths: torch.Tensor,  # (B,)
        target_lengths: torch.Tensor,  # (B,)
    ) -> Plan:
        """The plan a sample-wise call with these inputs would run (whatever the module's mode), not running it."""
        return samplewise_plan(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, self.options)

    def forward(
        self,
        encoder_out: torch.Tensor,  # (B, T, H_e)
        predictor_out: torch.Tensor,  # (B, U+1, H_p)
        joint: Joint,  # (N, T, H_e), (N, U+1, H_p) -> (N, T, U+1, V [+ D])
        targets: torch.Tensor,  # (B, U)
        logit_lengths: torch.Tensor,  # (B,)
        target_lengths: torch.Tensor,  # (B,)
    ) -> torch.Tensor:
        if self.mode == "batched":
            check_extra_outputs(joint, self.options.lattice)
            logits = joint(encoder_out, predictor_out)
            return batched_loss(logits, targets, logit_lengths, target_lengths, self.options)
        first = self.last_plan is None
        loss = samplewise_loss(
            encoder_out,
            predictor_out,
            joint,
            targets,
            logit_lengths,
            target_lengths,
            self.options,
            self.samplewise_state,
        )
        level = logging.INFO if first else logging.DEBUG  # the first plan: a training run's typical step
        if _logger.isEnabledFor(level):
            _logger.log(level, self.last_plan.describe())
        return loss
