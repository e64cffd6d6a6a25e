"""Sizes a file declares, checked before anything of that size is allocated.

A ``.nemo`` config or a checkpoint's model node declares an architecture (``d_model: 32768``) that a model
built from it would allocate, whatever the file's weights hold. Here the declared values are bounded, the
parameter shapes they imply are derived by building the model on torch's ``meta`` device (shapes, no
storage) and compared with the shapes stored in the file (read from its metadata:
``torch.load(map_location="meta")`` or ``mmap=True``); only then is the real model built. Every error names the
file, the key and both values. Also here: the member-size check of a weights file and the refusal of NaN/inf
weights by name. Needs only torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from asr_plugin.config_nodes import ConfigError

# build_transducer's integer arguments: (least, most). The upper bounds are far above any published
# transducer (Parakeet-TDT 1.1B: d_model 1024, 42 layers, 1024 tokens) and keep the meta-device build, which
# makes Python objects for every layer, cheap.
ARCHITECTURE_BOUNDS: dict[str, tuple[int, int]] = {
    "vocab_size": (2, 2**20),
    "input_dim": (1, 4096),
    "d_model": (1, 16384),
    "num_layers": (1, 256),
    "num_heads": (1, 256),
    "ffn_dim": (1, 65536),
    "conv_kernel_size": (1, 1023),
    "subsampling_factor": (1, 64),
    "subsampling_channels": (1, 16384),
    "predictor_embed_dim": (1, 16384),
    "predictor_dim": (1, 16384),
    "predictor_layers": (1, 64),
    "joint_dim": (1, 16384),
    "blank_id": (0, 2**20),
}
# Zip headers, the pickle and the record alignment of a torch file, beyond its tensors' bytes.
MEMBER_OVERHEAD_BYTES = 2**20
MEMBER_OVERHEAD_PER_TENSOR = 4096


def check_architecture_bounds(arguments: Mapping[str, Any], source: str) -> None:
    """ValueError naming `source`, the key and its value for an integer argument of `ARCHITECTURE_BOUNDS` that is
    not an integer or out of its range (other keys are left to the builder)."""
    for key, (least, most) in ARCHITECTURE_BOUNDS.items():
        value = arguments.get(key)
        if value is None or isinstance(value, Mapping):  # absent or the default (None); a node: the builder's to refuse
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{source}: {key}={value!r} is not an integer")
        if not least <= value <= most:
            raise ValueError(
                f"{source}: {key}={value} is outside [{least}, {most}], the sizes a transducer file may declare"
            )


def meta_shapes(build: Callable[[], torch.nn.Module]) -> dict[str, tuple[int, ...]]:
    """The state-dict shapes of the module `build()` makes on the meta device (no parameter memory)."""
    with torch.device("meta"):
        module = build()
    return {key: tuple(value.shape) for key, value in module.state_dict().items()}


def compare_shapes(
    declared: Mapping[str, tuple[int, ...]],
    stored: Mapping[str, torch.Tensor],
    source: str,
    architecture: Mapping[str, Any],
) -> None:
    """ValueError naming `source`, the weight key and both shapes when the shapes the declared `architecture`
    implies differ from the `stored` tensors' (whose data is never touched), or when either has keys the other
    lacks."""
    summary = ", ".join(f"{k}={v}" for k, v in architecture.items() if k in ARCHITECTURE_BOUNDS)
    for key, shape in declared.items():
        if key in stored and tuple(stored[key].shape) != shape:
            raise ValueError(
                f"{source}: weight {key} has shape {tuple(stored[key].shape)} but the declared "
                f"architecture ({summary}) implies {shape}"
            )
    missing = [key for key in declared if key not in stored]
    unexpected = [key for key in stored if key not in declared]
    if missing or unexpected:
        raise ValueError(
            f"{source}: the declared architecture ({summary}) does not match the stored weights: "
            f"{len(missing)} weight(s) missing {missing[:5]}, {len(unexpected)} unexpected "
            f"{unexpected[:5]}"
        )


def check_declared_shapes(
    build: Callable[[], torch.nn.Module],
    architecture: Mapping[str, Any],
    stored: Mapping[str, torch.Tensor],
    source: str,
) -> None:
    """Bounds `architecture` (`check_architecture_bounds`), then compares the shapes `build()` gives on the meta
    device with `stored` (`compare_shapes`): after this, building the model allocates what the file holds."""
    check_architecture_bounds(architecture, source)
    try:
        declared = meta_shapes(build)
    except ConfigError:  # a refused target: its own message names the key
        raise
    except (ValueError, TypeError, RuntimeError) as err:
        raise ValueError(f"{source}: the declared architecture cannot be built ({err})") from None
    compare_shapes(declared, stored, source, architecture)


def tensor_bytes(state: Mapping[str, torch.Tensor]) -> int:
    """The bytes `state`'s tensors take (meta tensors included)."""
    return sum(value.numel() * value.element_size() for value in state.values())


def check_member_size(state: Mapping[str, torch.Tensor], member_bytes: int, source: str) -> None:
    """ValueError naming `source` when a torch file of `member_bytes` bytes cannot hold `state`'s tensors, or holds
    far more than them (a compressed archive member expanding to gigabytes the state dict never uses)."""
    needed = tensor_bytes(state)
    slack = MEMBER_OVERHEAD_BYTES + MEMBER_OVERHEAD_PER_TENSOR * len(state) + needed // 100
    if needed > member_bytes:
        raise ValueError(f"{source}: its tensors declare {needed:,} bytes but the file holds only {member_bytes:,}")
    if member_bytes > needed + slack:
        raise ValueError(
            f"{source}: the file is {member_bytes:,} bytes but its tensors take only {needed:,}: "
            "refused before it is read (a padded or hostile file)"
        )


def check_finite(state: Mapping[str, torch.Tensor], source: str, what: str = "weight") -> None:
    """ValueError naming `source` and the first tensor (a `what`) holding NaN or infinity."""
    for key, value in state.items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            raise ValueError(f"{source}: {what} {key} holds {bad} NaN or infinite value(s) of {value.numel()}")
