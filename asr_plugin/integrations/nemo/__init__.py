"""The sample-wise transducer loss inside NeMo's own RNN-T training (docs/nemo_plugin.md).

Two ways in, both keeping NeMo's model, data, training step and checkpoints:

- a NeMo config selects ``model.joint._target_: asr_plugin.integrations.nemo.SampleWiseRNNTJoint`` with
  ``fuse_loss_wer: true`` and a ``memory_budget`` (call ``allow_in_nemo_configs()`` first: NeMo 3.0
  instantiates only allow-listed targets);
- ``use_samplewise(model, memory_budget=...)`` turns the joint of a built or restored NeMo transducer into one.

This package imports without NeMo; NeMo is imported when one of the names below is first used, and a
missing NeMo is reported with what to install.
"""

from __future__ import annotations

from importlib import import_module

from .requirement import NEMO_TESTED, require_nemo

_LAZY = {
    "SampleWiseRNNTJoint": "joint",
    "allow_in_nemo_configs": "joint",
    "use_samplewise": "swap",
}

__all__ = ["NEMO_TESTED", "SampleWiseRNNTJoint", "allow_in_nemo_configs", "use_samplewise"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_nemo(f"{__name__}.{name}")
    return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
