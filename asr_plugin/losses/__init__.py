"""Transducer losses (RNN-T, and TDT with ``durations=``) backed by fused C++/CUDA kernels (built on first use or
ahead of time with ``python -m asr_plugin.losses.build``, see docs/loss.md).

- ``transducer_loss``: batched mode, from full (B, T, U+1, V) logits (TDT: V token + D duration scores).
- ``samplewise_transducer_loss``: sample-wise mode, from encoder/predictor outputs and the joint, with
  transient memory bounded by ``memory_budget``.
- ``TransducerLoss``: nn.Module serving both modes with one call signature.
- ``StandardJoint``: the joint interface the sample-wise loss runs fused (``asr_plugin.models.Joint`` has it).
"""

from ._joint import StandardJoint
from ._memory import parse_memory_budget
from .batched import transducer_loss
from .module import MODES, TransducerLoss
from .samplewise import samplewise_transducer_loss

__all__ = [
    "MODES",
    "StandardJoint",
    "TransducerLoss",
    "parse_memory_budget",
    "samplewise_transducer_loss",
    "transducer_loss",
]
