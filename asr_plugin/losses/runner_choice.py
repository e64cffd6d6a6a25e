"""Which runner computes a sample-wise call's joint (``runners``): the flash runner where the ``flash_joint``
option asks for it and it can run (``choose_flash``), else the fused runner for a standard joint that can be
fused now, else the graph runner (``make_runner``)."""

from __future__ import annotations

import torch
from torch import nn

from .backends import resolve_backend
from .options import SamplewiseOptions
from .runners import FUSED_ACTIVATIONS, FusedRunner, GraphRunner, Joint, StandardJoint, check_joint, flash_declines


def flash_unavailable(joint: Joint, options: SamplewiseOptions, device: torch.device, dtype: torch.dtype) -> str | None:
    """Why the flash joint cannot compute this call (None: it can): the joint and lattice
    (``runners.flash_declines``), float64 (its kernels compute in float32), the kernels (it is Triton code: the
    backend "auto" or "triton") and the device (CUDA, or CPU under Triton's interpreter)."""
    reason = flash_declines(joint, options.lattice)
    if reason is not None:
        return reason
    if dtype == torch.float64:
        return "float64 joint outputs (the flash kernels compute in float32; float64 runs unfused)"
    if options.backend not in ("auto", "triton"):
        return f"backend={options.backend!r} (the flash joint's kernels are Triton's: use backend='auto' or 'triton')"
    try:
        resolve_backend(device, "triton")
    except (TypeError, ValueError) as err:
        return f"the Triton kernels cannot run here: {err}"
    return None


def choose_flash(joint: Joint, options: SamplewiseOptions, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a call runs the flash joint (`dtype`: the joint's output dtype): ``flash_joint`` "never" no;
    "auto" on CUDA tensors when it can (on the CPU the C++ kernels with the fused runner are faster than the
    Triton interpreter); "always" yes, or a ValueError naming why it cannot."""
    if options.flash_joint == "never" or (options.flash_joint == "auto" and device.type != "cuda"):
        return False
    reason = flash_unavailable(joint, options, device, dtype)
    if reason is not None and options.flash_joint == "always":
        raise ValueError(f"flash_joint='always': the flash joint cannot run this call: {reason}")
    return reason is None


def make_runner(joint: Joint, flash: bool = False) -> GraphRunner | FusedRunner:
    """With `flash` (the caller checked ``flash_declines``), the flash runner; else the fused runner for a standard
    joint that can be fused now, else the graph runner."""
    check_joint(joint)
    if flash:
        from .flash import FlashRunner  # imports triton: only when the flash joint runs

        return FlashRunner(joint)
    if isinstance(joint, nn.Module) and isinstance(joint, StandardJoint) and isinstance(joint.output, nn.Linear):
        activation, dropout = joint.fused_activation, float(joint.fused_dropout)
        if activation in FUSED_ACTIVATIONS and 0.0 <= dropout < 1.0:
            return FusedRunner(joint, activation, dropout)
    return GraphRunner(joint)
