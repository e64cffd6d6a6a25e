"""Config nodes (``{"_target_": name, **arguments}``, Hydra's layout) built safely and checked where they enter.

Two sources, one check:

- Nodes read from a user's file (a checkpoint's ``hyper_parameters``, an averaged checkpoint, a downloaded
  config) are data. :class:`AllowList` builds them with only the callables it was given: a ``_target_`` it
  does not know, at any depth, is refused naming the key and the target, so a checkpoint whose model node
  says ``_target_: torch.load`` (or ``numpy.load``, ``builtins.open``, ...) runs nothing. Values must be plain
  data (None, bool, int, float, str, lists and dicts of them); strings are never interpolated or resolved.
- Nodes of the user's own composed config (trainer, callbacks, loggers, data) may name any target, and Hydra
  builds them; :func:`check_config_node` first checks every argument against the target's signature and
  annotations, so ``trainer.max_steps=abc`` or ``optim.optimizer.lr=fast`` fails before anything runs, with
  the key named, instead of deep inside Lightning or torch.

Both go through :func:`check_arguments`: unknown argument names, missing required ones (not for
``_partial_`` nodes) and values that do not match the annotation are a :class:`ConfigError`.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import os
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

TARGET = "_target_"
PARTIAL = "_partial_"
# Hydra's instantiation options: they change how Hydra builds a node, not what it builds
HYDRA_OPTIONS = ("_convert_", "_recursive_")
MISSING = "???"  # OmegaConf's mandatory value not yet given (e.g. model.vocab_size before the tokenizer exists)
PLAIN = (type(None), bool, int, float, str)


class ConfigError(ValueError):
    """A config value that cannot be built: a foreign target, an unknown or missing argument, a wrong type."""


# ---------------------------------------------------------------- type checks


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def matches(value: Any, annotation: Any) -> bool:
    """Whether `value` (plain config data, or an object a caller passes) fits `annotation`.

    Config conventions: an int fits float, a list fits a tuple or any sequence, a string fits a path. bool
    does not fit int or float (``max_steps=true`` is a mistake). Annotations this cannot judge (protocols,
    type variables, callables' signatures) accept anything.
    """
    if annotation in (Any, inspect.Parameter.empty) or isinstance(annotation, typing.TypeVar):
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, arg) for arg in args)
    if origin is typing.Literal:
        return any(value == arg and type(value) is type(arg) for arg in args)
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation in (os.PathLike, str | os.PathLike):
        return isinstance(value, (str, os.PathLike))
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(matches(item, args[0]) for item in value)
        return not args or (len(args) == len(value) and all(matches(v, a) for v, a in zip(value, args)))
    if origin in (
        list,
        set,
        frozenset,
        collections.abc.Sequence,
        collections.abc.Iterable,
        collections.abc.Collection,
        collections.abc.MutableSequence,
    ):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            return False
        return not args or all(matches(item, args[0]) for item in value)
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        if not isinstance(value, Mapping):
            return False
        return not args or all(matches(k, args[0]) and matches(v, args[1]) for k, v in value.items())
    if origin is type or origin is collections.abc.Callable or annotation is collections.abc.Callable:
        return callable(value)
    check = origin or annotation
    if isinstance(check, type):
        try:
            return isinstance(value, check)
        except TypeError:  # runtime-uncheckable generics and protocols
            return True
    return True


def _signature(target: Callable) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature of `target` (a class: its ``__init__``) and its evaluated annotations ({} if unresolvable)."""
    function = target.__init__ if isinstance(target, type) else target
    signature = inspect.signature(target)
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # annotations naming what is imported only for type checkers: check names, not types
        hints = {}
    return signature, hints


def check_arguments(
    target: Callable,
    arguments: Mapping[str, Any],
    key: str,
    partial: bool = False,
    supplied: Iterable[str] = (),
    name: str | None = None,
) -> None:
    """Raises ConfigError unless ``target(**arguments)`` fits its signature.

    Args:
        target: the callable a node names.
        arguments: its keyword arguments (plain values; nested nodes are checked by the callers).
        key: the node's dotted config key, for the messages ("optim.optimizer").
        partial: a ``_partial_`` node: required arguments may be given later.
        supplied: argument names the caller passes itself (e.g. the Trainer's ``callbacks``).
        name: the target as the config names it (default: its defining module's name).
    """
    shown = name or _name(target)
    signature, hints = _signature(target)
    parameters = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    named = {
        name
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    where = f"{key}: " if key else ""
    unknown = sorted(set(arguments) - named) if not takes_any else []
    if unknown:
        raise ConfigError(f"{where}{shown} has no argument(s) {unknown}; it takes {sorted(named)}")
    if not partial:
        missing = [
            name
            for name in named
            if parameters[name].default is inspect.Parameter.empty
            and name not in arguments
            and name not in set(supplied)
        ]
        if missing:
            raise ConfigError(f"{where}{shown} needs {missing}: set {', '.join(_join(key, m) for m in missing)}")
    for argument, value in arguments.items():
        annotation = hints.get(argument, inspect.Parameter.empty)
        if argument in named and not matches(value, annotation):
            raise ConfigError(
                f"{_join(key, argument)}={value!r}: {shown} expects {_type_name(annotation)}, "
                f"got {type(value).__name__}"
            )


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _name(target: Callable) -> str:
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def _split(node: Mapping[str, Any], key: str) -> tuple[str, bool, dict[str, Any]]:
    """(target name, partial, arguments) of a node; raises on a missing target or positional ``_args_``."""
    name = node.get(TARGET)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{key}: no {TARGET} (a node naming what to build), got keys {sorted(node)[:8]}")
    partial = node.get(PARTIAL, False)
    if not isinstance(partial, bool):
        raise ConfigError(f"{_join(key, PARTIAL)}={partial!r} must be true or false")
    special = sorted(
        k
        for k in node
        if str(k).startswith("_") and str(k).endswith("_") and k not in (TARGET, PARTIAL, *HYDRA_OPTIONS)
    )
    if special:
        raise ConfigError(f"{key}: {special} are not supported in a config node (keyword arguments only)")
    arguments = {str(k): v for k, v in node.items() if k not in (TARGET, PARTIAL, *HYDRA_OPTIONS)}
    return name, partial, arguments


def is_node(value: Any) -> bool:
    """A mapping with a ``_target_``: something to build."""
    return isinstance(value, Mapping) and TARGET in value


# ---------------------------------------------------------------- nodes from files


class AllowList:
    """Builds config nodes naming only the given callables (and, with `optimizers`, ``torch.optim.<Name>``
    classes that subclass ``torch.optim.Optimizer``).

    Args:
        targets: {name a config uses: callable}; each callable is also known by its defining module's name
            (``asr_plugin.models.transducer.build_transducer`` for ``asr_plugin.models.build_transducer``).
        optimizers: allow ``torch.optim.<Name>`` optimizers.
        former: {name: callable} of defining modules a callable had before it moved: nodes that checkpoints
            stored with them still build (not listed in `names`).
    """

    def __init__(
        self, targets: Mapping[str, Callable], optimizers: bool = False, former: Mapping[str, Callable] | None = None
    ) -> None:
        self.public = dict(targets)
        self.former = dict(former or {})
        self.targets = {**self.former, **{_name(target): target for target in targets.values()}, **self.public}
        self.optimizers = optimizers

    def __or__(self, other: AllowList) -> AllowList:
        return AllowList(
            {**self.public, **other.public}, self.optimizers or other.optimizers, {**self.former, **other.former}
        )

    def names(self) -> list[str]:
        """The target names a config uses."""
        return sorted(self.public) + (["torch.optim.<Optimizer>"] if self.optimizers else [])

    def resolve(self, name: str, key: str) -> Callable:
        """The callable of target `name`, or ConfigError naming the key and the target."""
        if name in self.targets:
            return self.targets[name]
        if self.optimizers and name.startswith("torch.optim.") and name.count(".") == 2:
            import torch

            candidate = getattr(torch.optim, name.rsplit(".", 1)[1], None)
            if isinstance(candidate, type) and issubclass(candidate, torch.optim.Optimizer):
                return candidate
        allowed = ", ".join(self.names())
        raise ConfigError(
            f"{_join(key, TARGET)}={name!r} is refused: a node that checkpoints store (and files "
            f"bring back) may name only this project's classes here: {allowed}"
        )

    def build(self, node: Mapping[str, Any], key: str) -> Any:
        """Builds `node` (a ``_partial_`` node: a ``functools.partial``); nested nodes are built the same way.

        `node` is plain data (dicts from ``torch.load(weights_only=True)``, or ``OmegaConf.to_container``);
        nothing in it is interpolated or resolved.
        """
        if not isinstance(node, Mapping):
            raise ConfigError(f"{key}: expected a mapping with {TARGET}, got {type(node).__name__}")
        name, partial, arguments = _split(node, key)
        target = self.resolve(name, key)
        built = {arg: self._value(value, _join(key, arg)) for arg, value in arguments.items()}
        check_arguments(target, built, key, partial=partial, name=name)
        return functools.partial(target, **built) if partial else target(**built)

    def _value(self, value: Any, key: str) -> Any:
        if is_node(value):
            return self.build(value, key)
        if isinstance(value, Mapping):
            return {str(k): self._value(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._value(v, f"{key}[{i}]") for i, v in enumerate(value))
        if not isinstance(value, PLAIN):
            raise ConfigError(
                f"{key}: a {type(value).__name__} where a config holds plain values "
                "(None, bool, int, float, str, lists and mappings of them)"
            )
        return value


# ---------------------------------------------------------------- the user's own config


def check_config_node(node: Mapping[str, Any], key: str, supplied: Iterable[str] = ()) -> None:
    """Checks a node of the user's composed config (already ``OmegaConf.to_container(resolve=True,
    throw_on_missing=False)``) against its target's signature, nested nodes included; ``"???"`` values count
    as not yet given. The target is located with Hydra, as ``hydra.utils.instantiate`` would."""
    from hydra.utils import get_object

    name, partial, arguments = _split(node, key)
    try:
        target = get_object(name)
    except Exception as err:  # ImportError, AttributeError, ValueError: Hydra's message names the module
        raise ConfigError(f"{_join(key, TARGET)}={name!r} cannot be found ({err})") from None
    given = {arg: value for arg, value in arguments.items() if value != MISSING}
    for arg, value in given.items():
        for child_key, child in _nested_nodes(value, _join(key, arg)):
            check_config_node(child, child_key)
    plain = {arg: value for arg, value in given.items() if not _nested_nodes(value, "")}
    check_arguments(
        target,
        plain,
        key,
        partial=partial,
        name=name,
        supplied=set(supplied) | {arg for arg, value in arguments.items() if value == MISSING},
    )


def _nested_nodes(value: Any, key: str) -> list[tuple[str, Mapping[str, Any]]]:
    if is_node(value):
        return [(key, value)]
    if isinstance(value, (list, tuple)):
        return [found for i, item in enumerate(value) for found in _nested_nodes(item, f"{key}[{i}]")]
    return []
