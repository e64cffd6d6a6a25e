"""Values read from a file stay data: a string that looks like an OmegaConf interpolation (``${oc.env:HOME}``, a
recipe's ``${run_id:/some/path}``) would be resolved, with whatever resolvers the process registered, the moment
it reached an OmegaConf config (a Hydra ``instantiate``, a merge). Readers of checkpoints and ``.nemo`` configs
refuse such strings by key where their values can travel on. Stdlib only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INTERPOLATION_START = "${"


def first_interpolation(value: Any, key: str) -> tuple[str, str] | None:
    """(key, string) of the first string under `value` (mappings and lists followed) that holds ``${``."""
    if isinstance(value, Mapping):
        items = ((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{key}[{i}]", v) for i, v in enumerate(value))
    else:
        return (key, value) if isinstance(value, str) and INTERPOLATION_START in value else None
    return next((found for k, v in items if (found := first_interpolation(v, k)) is not None), None)


def refuse_interpolations(value: Any, key: str, source: str) -> None:
    """ValueError naming `source` and the key of the first interpolation-like string under `value`."""
    found = first_interpolation(value, key)
    if found is not None:
        raise ValueError(
            f"{source}: {found[0]}={found[1]!r} looks like an interpolation; values read from a file "
            "are data and are never resolved, so this one is refused"
        )
