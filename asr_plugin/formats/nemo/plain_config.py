"""A ``.nemo`` file's ``model_config.yaml`` read as plain data: nothing in it is resolved with a resolver,
expanded without bound or executed.

- YAML aliases (``*name``) load as shared objects, and the size of the expanded config is counted before
  anything is copied, by a walk that visits each shared object once (its size is remembered): a few kB of nested
  aliases or references ("billion laughs") that would expand to billions of nodes, or 10^12, are refused past
  `MAX_CONFIG_NODES` in the time it takes to read them, before any expansion (which ``OmegaConf.create`` would
  attempt, and hang on).
- NeMo may save ``${model.x}``-style references unresolved (``feat_in: ${model.preprocessor.features}``). A
  string that is exactly one reference to a key of the model config (with or without the ``model.`` root) is
  replaced by a copy of that value, within a node budget and a depth limit (references of references);
  OmegaConf is never asked to resolve anything, so no resolver (``${oc.env:HOME}``, a recipe's
  ``${run_id:...}``) runs and no environment value is copied in.
- Anything else that looks like an interpolation (a resolver call, a reference outside the model config such as
  ``${trainer.max_steps}``, text around a reference) stays the string it is; `refuse_section_interpolations`
  refuses such strings, by key, in the sections the importer reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from asr_plugin.plain_data import refuse_interpolations

# More than any NeMo config needs (a FastConformer's holds a few thousand nodes, its labels included).
MAX_CONFIG_NODES = 1_000_000
# References of references, followed this deep (a cycle stops here too).
MAX_REFERENCE_DEPTH = 32
REFERENCE = re.compile(r"\$\{([A-Za-z_][\w-]*(?:\.[\w-]+)*)\}")
MODEL_ROOT = "model."
# libyaml's safe loader where PyYAML was built with it (fast), else PyYAML's own; both build plain data only.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_data(text: str, source: str) -> Any:
    """The YAML document `text` as plain Python data (`source` names the file in errors). An alias is one shared
    object here, not a copy: the expansion happens, bounded, in `resolve_references`."""
    try:
        return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 (a safe loader: plain data only)
    except yaml.YAMLError as err:
        raise ValueError(f"{source} is not valid YAML ({err})") from err
    except RecursionError:
        raise ValueError(f"{source}: the YAML document is nested too deeply") from None


class _Resolver:
    """Copies a config, replacing whole-string references by copies of their targets, counting the nodes made;
    `expanded_nodes` says beforehand how many that will be."""

    def __init__(self, config: Mapping[str, Any], source: str) -> None:
        self.config, self.source, self.nodes = config, source, 0
        # sizes of the shared objects (by id: an alias is the same object) and references already counted
        self._sizes: dict[int | str, int] = {}

    def expanded_nodes(self, value: Any, depth: int = 0) -> int:
        """The nodes `copy(value)` makes, counted without copying: each container and each reference target is
        walked once, so nested aliases and references cost their written size, not their expanded one. A
        container met again inside itself (a recursive alias) or a chain past `MAX_REFERENCE_DEPTH` counts one
        node here: `copy` refuses it with its own message."""
        if isinstance(value, (Mapping, list)):
            key: int | str = id(value)
            children = value.values() if isinstance(value, Mapping) else value
        else:
            match = REFERENCE.fullmatch(value) if isinstance(value, str) else None
            found, target = self.target(match.group(1)) if match else (False, None)
            if not found or depth >= MAX_REFERENCE_DEPTH:
                return 1
            key, children, depth = f"${match.group(1)}", (target,), depth + 1
        if key in self._sizes:
            return self._sizes[key]
        self._sizes[key] = 1  # while being counted: met again inside itself, a cycle
        self._sizes[key] = 1 + sum(self.expanded_nodes(child, depth) for child in children)
        return self._sizes[key]

    def target(self, path: str) -> tuple[bool, Any]:
        node: Any = self.config
        for part in (path[len(MODEL_ROOT) :] if path.startswith(MODEL_ROOT) else path).split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False, None
            node = node[part]
        return True, node

    def copy(self, value: Any, key: str, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_CONFIG_NODES:
            raise ValueError(
                f"{self.source}: the config expands to more than {MAX_CONFIG_NODES:,} nodes "
                f"(at {key}); references are copied, and this many is no NeMo model config"
            )
        if isinstance(value, Mapping):
            return {k: self.copy(v, f"{key}.{k}" if key else str(k), depth) for k, v in value.items()}
        if isinstance(value, list):
            return [self.copy(v, f"{key}[{i}]", depth) for i, v in enumerate(value)]
        match = REFERENCE.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            return value
        found, target = self.target(match.group(1))
        if not found:
            return value  # e.g. ${trainer.max_steps}: outside the model config, kept as written
        if depth >= MAX_REFERENCE_DEPTH:
            raise ValueError(
                f"{self.source}: {key}={value!r} is a chain of more than {MAX_REFERENCE_DEPTH} references (a cycle?)"
            )
        return self.copy(target, key, depth + 1)


def resolve_references(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A copy of `config` (aliases expanded) with every ``${model.a.b}`` / ``${a.b}`` string that names a key of
    `config` replaced by (a copy of) its value; other strings are kept. ValueError naming `source` past
    `MAX_CONFIG_NODES` nodes, `MAX_REFERENCE_DEPTH` chained references, or nesting too deep (a recursive alias)."""
    check_expanded_size(config, source)
    try:
        return _Resolver(config, source).copy(config, "")
    except RecursionError:
        raise ValueError(f"{source}: the config is nested too deeply (a recursive alias?)") from None


def check_expanded_size(config: Mapping[str, Any], source: str, max_nodes: int = MAX_CONFIG_NODES) -> None:
    """ValueError naming `source` when `config` (as `load_yaml_data` gave it: aliases shared) expands to more than
    `max_nodes` nodes, its aliases and references copied; counted without copying, in the time it takes to walk
    what is written. What any YAML file read as a config must pass before OmegaConf sees it (which would
    expand, and hang on, a few kB of nested aliases)."""
    try:
        nodes = _Resolver(config, source).expanded_nodes(config)
    except RecursionError:
        raise ValueError(f"{source}: the config is nested too deeply (a recursive alias?)") from None
    if nodes > max_nodes:
        raise ValueError(
            f"{source}: the config expands to more than {max_nodes:,} nodes ({nodes:,}: aliases and "
            "references are copied, and this many is no model or run config)"
        )


def refuse_section_interpolations(config: Mapping[str, Any], sections: Iterable[str], source: str) -> None:
    """ValueError naming the key of the first string in `sections` of `config` still holding ``${``: a resolver
    call or a reference this reader does not resolve, which the importer would otherwise take as a value."""
    for section in sections:
        if section in config:
            refuse_interpolations(config[section], section, source)
