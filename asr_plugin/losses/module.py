"""``TransducerLoss``: one nn.Module call signature for both loss modes, as used by the model code."""

from __future__ import annotations

import logging

import torch
from torch import nn

from ._validation import check_options, check_tdt_options
from .backends import check_backend
from .batched import transducer_loss
from .engine import SamplewiseState
from .planning import Plan, parse_max_samples, parse_memory_budget
from .runners import Joint, check_extra_outputs
from .samplewise import plan_samplewise, samplewise_transducer_loss

MODES = ("batched", "samplewise")
_logger = logging.getLogger(__name__)


class TransducerLoss(nn.Module):
    """Transducer loss over (encoder_out, predictor_out, joint): RNN-T, or TDT with ``durations``.

    mode="batched" materialises ``joint(encoder_out, predictor_out)`` (B, T, U+1, V) (TDT: V + D) and calls
    ``transducer_loss``; mode="samplewise" calls ``samplewise_transducer_loss`` with ``memory_budget``
    (bytes or a string like "512MiB"/"2GB"; None: 1 GiB on CUDA, 256 MiB on CPU) and
    ``max_samples_per_group`` (both ignored in batched mode). ``durations`` (None: RNN-T; TDT: e.g.
    [0, 1, 2, 3, 4], containing 0 and 1), ``sigma``, ``omega`` and ``backend`` (the kernels: "auto", "cpp",
    "triton", "cuda") are as in ``transducer_loss``.

    Sample-wise, the module keeps its state across calls: the fp16 gradient scale (lowered after an overflow,
    then kept) and the plan of the last call (``last_plan``; its first plan is logged at INFO on
    ``asr_plugin.losses.module``, later ones at DEBUG). ``plan(...)`` gives the plan of a call without running it.
    """

    def __init__(
        self,
        mode: str = "batched",
        blank: int = 0,
        reduction: str = "mean",
        clamp: float | None = None,
        memory_budget: int | str | None = None,
        max_samples_per_group: int | None = None,
        durations: list[int] | tuple[int, ...] | None = None,
        sigma: float = 0.0,
        omega: float = 0.0,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        self.backend = check_backend(backend)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        check_options(blank, reduction, clamp)
        self.durations = check_tdt_options(durations, sigma, omega)
        self.sigma, self.omega = float(sigma), float(omega)
        self.mode, self.blank, self.reduction, self.clamp = mode, blank, reduction, clamp
        self.memory_budget = parse_memory_budget(memory_budget)
        self.max_samples_per_group = parse_max_samples(max_samples_per_group)
        self.samplewise_state = SamplewiseState()

    @property
    def num_durations(self) -> int:
        """D, the duration scores the joint must emit after its V token scores (0: RNN-T)."""
        return len(self.durations or ())

    @property
    def last_plan(self) -> Plan | None:
        """The plan of the last sample-wise call (None before the first)."""
        return self.samplewise_state.last_plan

    def extra_repr(self) -> str:
        tdt = "" if self.durations is None else f", durations={list(self.durations)}, sigma={self.sigma}, omega={self.omega}"
        return (
            f"mode={self.mode!r}, blank={self.blank}, reduction={self.reduction!r}, clamp={self.clamp}, "
            f"memory_budget={self.memory_budget}, max_samples_per_group={self.max_samples_per_group}{tdt}, "
            f"backend={self.backend!r}"
        )

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
        return plan_samplewise(
            encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, blank=self.blank,
            memory_budget=self.memory_budget, max_samples_per_group=self.max_samples_per_group,
            durations=self.durations, sigma=self.sigma,
        )

    def forward(
        self,
        encoder_out: torch.Tensor,  # (B, T, H_e)
        predictor_out: torch.Tensor,  # (B, U+1, H_p)
        joint: Joint,  # (N, T, H_e), (N, U+1, H_p) -> (N, T, U+1, V [+ D])
        targets: torch.Tensor,  # (B, U)
        logit_lengths: torch.Tensor,  # (B,)
        target_lengths: torch.Tensor,  # (B,)
    ) -> torch.Tensor:
        options = dict(
            blank=self.blank, reduction=self.reduction, clamp=self.clamp, durations=self.durations, sigma=self.sigma,
            omega=self.omega, backend=self.backend,
        )
        if self.mode == "batched":
            check_extra_outputs(joint, self.durations)
            logits = joint(encoder_out, predictor_out)
            return transducer_loss(logits, targets, logit_lengths, target_lengths, **options)
        first = self.last_plan is None
        loss = samplewise_transducer_loss(
            encoder_out,
            predictor_out,
            joint,
            targets,
            logit_lengths,
            target_lengths,
            memory_budget=self.memory_budget,
            max_samples_per_group=self.max_samples_per_group,
            state=self.samplewise_state,
            **options,
        )
        level = logging.INFO if first else logging.DEBUG  # the first plan: a training run's typical step
        if _logger.isEnabledFor(level):
            _logger.log(level, self.last_plan.describe())
        return loss
