"""Transducer losses over a lattice value (``RNNT(clamp, fastemit_lambda)``, ``TDT(durations, sigma, clamp)``) backed
by fused C++/CUDA kernels (built on first use or ahead of time with ``python -m asr_plugin.losses.build``, see
docs/loss.md).

- ``transducer_loss``: batched mode, from full (B, T, U+1, V) logits (TDT: V token + D duration scores).
- ``samplewise_transducer_loss``: sample-wise mode, from encoder/predictor outputs and the joint, with
  transient memory bounded by ``memory_budget``; ``plan_samplewise`` gives its ``Plan`` without running it;
  ``flash_joint`` chooses the flash joint (``flash``: no logits tensor) for a standard joint on CUDA.
- ``TransducerLoss``: nn.Module serving both modes with one call signature (``last_plan``, ``plan(...)``).
- ``LossOptions``, ``SamplewiseOptions`` (``options``): a loss's options as one value, checked once when built
  (by ``TransducerLoss``, or by the functional entries above) and passed down.
- ``StandardJoint``: the joint interface the sample-wise loss runs fused (``asr_plugin.models.Joint`` has it);
  ``JointShape``: what any joint may declare (hidden size, extra outputs such as TDT's duration scores).
- ``RNNT``, ``TDT`` (``lattices``): the lattices with their parameters and ops, stored as plain data
  (``record()``, ``lattice_from_record``); ``planning``: budgets and plans.
"""

from .batched import transducer_loss
from .engine import SamplewiseState
from .lattices import LATTICES, RNNT, TDT, TransducerLattice, lattice_from_record
from .module import MODES, TransducerLoss
from .options import LossOptions, SamplewiseOptions
from .planning import Group, Plan, parse_memory_budget
from .runners import JointShape, StandardJoint
from .samplewise import plan_samplewise, samplewise_transducer_loss

__all__ = [
    "LATTICES",
    "MODES",
    "RNNT",
    "SamplewiseOptions",
    "SamplewiseState",
    "TDT",
    "Group",
    "JointShape",
    "LossOptions",
    "Plan",
    "StandardJoint",
    "TransducerLattice",
    "TransducerLoss",
    "lattice_from_record",
    "parse_memory_budget",
    "plan_samplewise",
    "samplewise_transducer_loss",
    "transducer_loss",
]
