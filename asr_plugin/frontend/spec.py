"""Front-end specs: plain data saying how audio becomes a model's features, and `build_frontend(spec)`.

A spec is a dict a checkpoint can store (str, float, int, bool, None and lists only):

* ``{"kind": "logmel", "options": {LogMelFeatures keyword arguments}, "mean": [F floats], "std": [F floats]}``:
  this project's log-mel features normalised with global statistics of the training data. Without
  "mean"/"std" (or with them null) the spec is incomplete: the data module computes the statistics.
* ``{"kind": "nemo", "options": {NemoMelFrontend keyword arguments}}``: NeMo's preprocessor (pre-emphasis,
  per-utterance normalisation, dither in training mode only).
* ``{"kind": "sherpa", "options": {SherpaFbank keyword arguments}}``: the features sherpa-onnx computes for a
  NeMo transducer (kaldi-native-fbank with sherpa's options, then its "per_feature" normalisation or none).
  A model trained on them deploys to sherpa-onnx without any feature adapter (docs/decoding.md).
* ``{"kind": "sherpa_online", "options": {SherpaOnlineFbank keyword arguments}}``: the features sherpa-onnx's
  online recogniser computes for a NeMo transducer (Hann window, 0-8000 Hz, no normalisation), which can be
  computed as audio arrives (`asr_plugin.frontend.online.fbank.StreamingFbank`; docs/streaming.md).

`complete_frontend_spec` checks a spec and fills every option's default, so a stored spec does not depend
on this project's defaults at the time it is read. Every built front end maps (B, S) audio and (B,) sample
counts to (B, T, F) features and (B,) frame counts, and has `sample_rate` and `hop_length` (F of a spec:
`frontend_feature_dim`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from asr_plugin.frontend.logmel import FeatureStats, LogMelFeatures, LogMelFrontend
from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.frontend.sherpa import SHERPA_NORMALIZATIONS, SherpaFbank, SherpaOnlineFbank

FRONTEND_KINDS = ("logmel", "nemo", "sherpa", "sherpa_online")
_CLASSES: dict[str, type[nn.Module]] = {
    "logmel": LogMelFeatures,
    "nemo": NemoMelFrontend,
    "sherpa": SherpaFbank,
    "sherpa_online": SherpaOnlineFbank,
}
_SPEC_KEYS = {
    "logmel": {"kind", "options", "mean", "std"},
    "nemo": {"kind", "options"},
    "sherpa": {"kind", "options"},
    "sherpa_online": {"kind", "options"},
}


def _defaults(kind: str) -> dict[str, Any]:
    parameters = inspect.signature(_CLASSES[kind]).parameters
    return {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}


def complete_frontend_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` checked and with every option filled in from the front end's defaults (a new dict).

    ValueError names an unknown kind, key or option, or statistics of the wrong size.
    """
    if not isinstance(spec, Mapping):
        raise ValueError(f"front-end spec must be a mapping with a 'kind', got {type(spec).__name__}")
    kind = spec.get("kind")
    if kind not in FRONTEND_KINDS:
        raise ValueError(f"front-end spec: kind must be one of {FRONTEND_KINDS}, got {kind!r}")
    unknown = set(spec) - _SPEC_KEYS[kind]
    if unknown:
        raise ValueError(
            f"front-end spec of kind {kind!r}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_SPEC_KEYS[kind])}"
        )
    options = spec.get("options") or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"front-end spec: options must be a mapping, got {type(options).__name__}")
    defaults = _defaults(kind)
    bad = set(options) - set(defaults)
    if bad:
        raise ValueError(
            f"front-end spec of kind {kind!r}: unknown option(s) {sorted(bad)}; "
            f"{_CLASSES[kind].__name__} takes {sorted(defaults)}"
        )
    for name, value in options.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        numeric_default = isinstance(defaults[name], (int, float)) and not isinstance(defaults[name], bool)
        if numeric_default and not (number or value is None):
            raise ValueError(f"front-end spec: option {name} must be a number, got {value!r}")
    complete: dict[str, Any] = {"kind": kind, "options": {**defaults, **options}}
    if kind == "sherpa":
        # checked here, not only when built: the value becomes the exported encoder's normalize_type
        normalize = complete["options"]["normalize"]
        if normalize not in SHERPA_NORMALIZATIONS:
            raise ValueError(
                f"front-end spec of kind 'sherpa': option normalize={normalize!r}; "
                f'sherpa-onnx implements {SHERPA_NORMALIZATIONS} (None: its normalize_type "")'
            )
    if kind in ("sherpa", "sherpa_online"):
        bins = complete["options"]["num_mel_bins"]
        if isinstance(bins, float) and bins.is_integer():
            complete["options"]["num_mel_bins"] = int(bins)  # YAML/JSON may hand over 80.0
        if not (isinstance(complete["options"]["num_mel_bins"], int) and complete["options"]["num_mel_bins"] > 0):
            raise ValueError(
                f"front-end spec of kind {kind!r}: option num_mel_bins={bins!r} must be a positive integer"
            )
    if kind == "logmel":
        mean, std = spec.get("mean"), spec.get("std")
        if (mean is None) != (std is None):
            raise ValueError("front-end spec of kind 'logmel': give both mean and std, or neither")
        bins = complete["options"]["num_mel_bins"]
        for name, values in (("mean", mean), ("std", std)):
            if values is not None and len(values) != bins:
                raise ValueError(f"front-end spec: {name} has {len(values)} values, num_mel_bins is {bins}")
        if std is not None and min(std) <= 0:
            raise ValueError("front-end spec: every std must be positive")
        complete["mean"] = None if mean is None else [float(v) for v in mean]
        complete["std"] = None if std is None else [float(v) for v in std]
    return complete


def frontend_needs_stats(spec: Mapping[str, Any]) -> bool:
    """Whether a (complete) spec still lacks the global statistics it normalises with."""
    return spec["kind"] == "logmel" and spec["mean"] is None


def frontend_feature_dim(spec: Mapping[str, Any]) -> int:
    """F, the features' last dimension, of a spec."""
    return int(complete_frontend_spec(spec)["options"]["num_mel_bins"])


def with_stats(spec: Mapping[str, Any], stats: FeatureStats) -> dict[str, Any]:
    """A "logmel" spec completed with `stats`' mean and std."""
    spec = complete_frontend_spec(spec)
    if spec["kind"] != "logmel":
        raise ValueError(f"only a 'logmel' front end takes global statistics, not {spec['kind']!r}")
    return complete_frontend_spec({**spec, "mean": stats.mean.tolist(), "std": stats.std.tolist()})


def build_frontend(spec: Mapping[str, Any]) -> nn.Module:
    """The front end of `spec` (in training mode, as any new nn.Module: call ``.eval()`` for evaluation,
    which turns off a NeMo or sherpa front end's dither)."""
    spec = complete_frontend_spec(spec)
    if spec["kind"] == "nemo":
        return NemoMelFrontend(**spec["options"])
    if spec["kind"] == "sherpa":
        return SherpaFbank(**spec["options"])
    if spec["kind"] == "sherpa_online":
        return SherpaOnlineFbank(**spec["options"])
    if frontend_needs_stats(spec):
        raise ValueError(
            "front-end spec of kind 'logmel' has no mean/std: compute the feature statistics "
            "first (the data module does, see docs/data.md)"
        )
    stats = FeatureStats(torch.tensor(spec["mean"]), torch.tensor(spec["std"]), num_frames=0)
    return LogMelFrontend(spec["options"], stats)
