"""Turns the features sherpa-onnx computes into the features a model was trained on, inside the exported encoder.

`encoder_input(spec)` is the exported encoder's first module. A model trained with the front end of kind
"sherpa" (`asr_plugin.frontend.sherpa.SherpaFbank`) was trained on sherpa-onnx's own log filterbank: it gets
`SherpaFeatures` (the layout changes, then the training front end's own per-utterance normalisation, if any),
and its transcripts in sherpa-onnx are the recipe's. Every other front end ("logmel",
"nemo", imported NeMo models) gets the approximate `SherpaFeatureAdapter` below.

sherpa-onnx computes its own log-mel features (`asr_plugin.frontend.sherpa`), which are neither this
project's "logmel" front end (HTK mel filters without area normalisation, periodic Hann window, no
pre-emphasis, global mean/std) nor exactly NeMo's (symmetric window, filters up to 8 kHz). The exported
model is written with ``normalize_type=""`` (sherpa then hands over its raw log filterbank) and its encoder
starts with this adapter:

1. exp: sherpa's mel energies (B, T, F_s);
2. a fixed non-negative (F, F_s) map to the training front end's mel energies: each training filter,
   weighted by that front end's window energy and pre-emphasis, is approximated by a non-negative
   combination of sherpa's filters weighted by sherpa's (least squares on a 1 Hz-ish frequency grid);
3. the training front end's log (its floor or guard), then its normalisation (the checkpoint's global
   statistics, or NeMo's per-utterance standardisation over the valid frames).

What it cannot undo: sherpa's filters stop at 7600 Hz (energy above it is extrapolated from the top
filters), its frames are centred 5 ms later than this project's, an utterance gets (S + 80) // 160
frames instead of S // 160 + 1 ("logmel") or S // 160 ("nemo"), and the window shapes differ. docs/decoding.md
gives the resulting agreement with the training features' transcripts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torchaudio
from torch import nn

from asr_plugin.frontend import sherpa
from asr_plugin.frontend.nemo import WINDOWS, normalize_utterances
from asr_plugin.frontend.sherpa import normalize_per_feature
from asr_plugin.frontend.spec import complete_frontend_spec

GRID_POINTS = 4001  # frequency grid of the fit, 0 Hz to Nyquist (2 Hz steps at 16 kHz)
KNOT_SPACING = 50.0  # Hz, of the smooth spectra the map is fitted on
CORRELATION_HZ = 1000.0  # how far apart in frequency their power is still alike


def _preemphasis_gain(coefficient: float | None, frequencies: torch.Tensor) -> torch.Tensor:
    """(N,) float64 |1 - a exp(-i w)|^2 of pre-emphasis coefficient a at `frequencies` in Hz (1 for None)."""
    if not coefficient:
        return torch.ones_like(frequencies)
    omega = 2 * torch.pi * frequencies / sherpa.SHERPA_SAMPLE_RATE
    return 1 - 2 * coefficient * torch.cos(omega) + coefficient**2


def training_filters(spec: Mapping[str, Any], frequencies: torch.Tensor) -> torch.Tensor:
    """(N, F) float64 mel filters of a complete front-end `spec` at `frequencies`, scaled by what else shapes
    its mel energies of a broadband signal: n_fft times the window's energy, and its pre-emphasis."""
    options = spec["options"]
    points = frequencies.numel()
    if spec["kind"] == "logmel":
        win_length = round(options["sample_rate"] * options["window_ms"] / 1000)
        n_fft = 1 << (win_length - 1).bit_length()
        window = torch.hann_window(win_length, periodic=True, dtype=torch.float64)
        filters = torchaudio.functional.melscale_fbanks(
            points, 0.0, options["sample_rate"] / 2, options["num_mel_bins"], options["sample_rate"]
        )
        preemphasis = None
    else:
        n_fft, win_length = options["n_fft"], options["win_length"]
        window = WINDOWS[options["window"]](win_length, periodic=False, dtype=torch.float64)
        f_max = options["f_max"] if options["f_max"] is not None else options["sample_rate"] / 2
        filters = torchaudio.functional.melscale_fbanks(
            points,
            options["f_min"],
            f_max,
            options["num_mel_bins"],
            options["sample_rate"],
            norm=options["mel_norm"],
            mel_scale="slaney",
        )
        preemphasis = options["preemphasis"]
    scale = n_fft * window.pow(2).sum() * _preemphasis_gain(preemphasis, frequencies)  # (N,)
    return filters.double() * scale[:, None]


def sherpa_filters(num_bins: int, frequencies: torch.Tensor) -> torch.Tensor:
    """(N, F_s) float64 sherpa's mel filters scaled the same way as `training_filters`."""
    window = sherpa.povey_window()
    scale = sherpa.SHERPA_N_FFT * window.pow(2).sum() * _preemphasis_gain(sherpa.SHERPA_PREEMPHASIS, frequencies)
    return sherpa.sherpa_mel_filters(num_bins, frequencies.numel()) * scale[:, None]


def nonnegative_least_squares(basis: torch.Tensor, target: torch.Tensor, iterations: int = 5000) -> torch.Tensor:
    """X >= 0 minimising ||X @ basis - target|| (Frobenius), by accelerated projected gradient (FISTA).

    basis: (K, N), target: (J, N), float64 -> X: (J, K).
    """
    gram = basis @ basis.T  # (K, K)
    correlation = target @ basis.T  # (J, K)
    step = 1.0 / torch.linalg.eigvalsh(gram)[-1]
    x = torch.zeros_like(correlation)
    y, momentum = x.clone(), 1.0
    for _ in range(iterations):
        previous = x
        x = (y - step * (y @ gram - correlation)).clamp_min(0.0)
        momentum, last = (1 + (1 + 4 * momentum**2) ** 0.5) / 2, momentum
        y = x + ((last - 1) / momentum) * (x - previous)
    return x


def smooth_spectra(frequencies: torch.Tensor) -> torch.Tensor:
    """(N, M) float64 a basis of the spectra the map is fitted on: piecewise-linear power spectra with knots
    every `KNOT_SPACING` Hz whose knot values are correlated over `CORRELATION_HZ` (exp(-|f - f'| / c)).

    Fitting the filters on these rather than on bare frequencies asks for equal energies of smooth
    spectra (a triangle is then as good as two narrower ones with its centre and area), and lets the map
    extrapolate the energy above sherpa's 7600 Hz from the filters below it.
    """
    knots = torch.arange(0.0, sherpa.SHERPA_SAMPLE_RATE / 2 + 1, KNOT_SPACING, dtype=torch.float64)  # (M,)
    hats = (1 - (frequencies[:, None] - knots[None, :]).abs() / KNOT_SPACING).clamp_min(0.0)  # (N, M)
    covariance = torch.exp(-(knots[:, None] - knots[None, :]).abs() / CORRELATION_HZ)
    return hats @ torch.linalg.cholesky(covariance)


def sherpa_to_training_map(spec: Mapping[str, Any], sherpa_bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The (F, F_s) non-negative map from sherpa's mel energies to `spec`'s, and (F,) its relative error per
    training bin: the RMS energy error over the smooth spectra (`smooth_spectra`) over the RMS energy."""
    frequencies = torch.linspace(0, sherpa.SHERPA_SAMPLE_RATE / 2, GRID_POINTS, dtype=torch.float64)
    spectra = smooth_spectra(frequencies)  # (N, M)
    target = training_filters(spec, frequencies).T @ spectra  # (F, M): energies of the smooth spectra
    basis = sherpa_filters(sherpa_bins, frequencies).T @ spectra  # (F_s, M)
    weights = nonnegative_least_squares(basis, target)
    error = (weights @ basis - target).norm(dim=1) / target.norm(dim=1)
    return weights, error


def check_sherpa_compatible(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The complete `spec`; ValueError naming the option when sherpa's features cannot stand in for it."""
    spec = complete_frontend_spec(spec)
    if spec["kind"] == "sherpa":
        raise ValueError(
            "front end of kind 'sherpa' computes sherpa-onnx's own features: it needs no adapter "
            "(encoder_input gives SherpaFeatures)"
        )
    if spec["kind"] == "sherpa_online":
        raise ValueError(
            "front end of kind 'sherpa_online' computes the features of sherpa-onnx's online recogniser, which its "
            "offline recogniser does not: export the model for sherpa_onnx.OnlineRecognizer "
            "(scripts/export_onnx.py --streaming, asr_plugin.export.export_onnx_streaming)"
        )
    options = spec["options"]
    if options["sample_rate"] != sherpa.SHERPA_SAMPLE_RATE:
        raise ValueError(
            f"front end option sample_rate={options['sample_rate']}: sherpa-onnx's NeMo transducer "
            f"features are computed at {sherpa.SHERPA_SAMPLE_RATE} Hz"
        )
    hop = options["hop_length"] if spec["kind"] == "nemo" else round(options["sample_rate"] * options["hop_ms"] / 1000)
    if hop != sherpa.SHERPA_HOP_LENGTH:
        raise ValueError(f"front end hop of {hop} samples: sherpa-onnx's frames are {sherpa.SHERPA_HOP_LENGTH} apart")
    if spec["kind"] == "logmel" and spec["mean"] is None:
        raise ValueError("front end of kind 'logmel' has no mean/std: the export needs the training statistics")
    if spec["kind"] == "nemo" and options["mag_power"] != 2.0:
        raise ValueError(f"front end option mag_power={options['mag_power']}: sherpa-onnx computes power spectra (2.0)")
    return spec


class SherpaFeatureAdapter(nn.Module):
    """(B, F_s, T) sherpa's raw log filterbank (its encoder input layout), (B,) frames -> (B, T, F) the training
    front end's features (padded frames 0), for a front-end spec that `check_sherpa_compatible` accepts."""

    def __init__(self, spec: Mapping[str, Any], sherpa_bins: int | None = None) -> None:
        super().__init__()
        spec = check_sherpa_compatible(spec)
        options = spec["options"]
        self.sherpa_bins = sherpa_bins or options["num_mel_bins"]
        weights, self.fit_error = sherpa_to_training_map(spec, self.sherpa_bins)
        self.register_buffer("weights", weights.T.float().contiguous())  # (F_s, F)
        self.kind = spec["kind"]
        if self.kind == "logmel":
            self.log, self.guard, self.guard_type, self.normalize = True, options["log_floor"], "clamp", None
            self.register_buffer("mean", torch.tensor(spec["mean"]))
            self.register_buffer("inv_std", 1.0 / torch.tensor(spec["std"]))
        else:
            self.log, self.guard = options["log"], options["log_guard"]
            self.guard_type, self.normalize = options["log_guard_type"], options["normalize"]

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mel = torch.matmul(features.transpose(1, 2).exp(), self.weights)  # (B, T, F)
        if self.log:
            mel = torch.log(mel + self.guard if self.guard_type == "add" else mel.clamp_min(self.guard))
        keep = (torch.arange(mel.shape[1], device=mel.device) < lengths.unsqueeze(1)).unsqueeze(-1)  # (B, T, 1)
        if self.kind == "logmel":
            mel = (mel - self.mean) * self.inv_std
        else:
            mel = normalize_utterances(mel, keep, lengths, self.normalize)
        return mel.masked_fill(~keep, 0.0)


class SherpaFeatures(nn.Module):
    """The encoder input of a model trained with the front end of kind "sherpa": (B, F, T) sherpa's raw log
    filterbank, (B,) frames -> (B, T, F) the training features: `normalize_per_feature` when the front end
    normalises, padded frames 0.

    The normalisation runs here, not in sherpa-onnx (``normalize_type`` stays ""): it is then the training
    front end's own code, float64 and two-pass, rather than sherpa's float32 one, whose rounding a bin at the
    log floor amplifies by 1e5 and whose formula changed in sherpa-onnx 1.13.5."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__()
        spec = complete_frontend_spec(spec)
        if spec["kind"] != "sherpa":
            raise ValueError(
                f"front end of kind {spec['kind']!r} is not sherpa-onnx's: its features go through SherpaFeatureAdapter"
            )
        self.sherpa_bins = int(spec["options"]["num_mel_bins"])
        self.normalize = spec["options"]["normalize"]

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = features.transpose(1, 2)  # (B, T, F)
        if self.normalize == "per_feature":
            return normalize_per_feature(x, lengths)
        keep = (torch.arange(x.shape[1], device=x.device) < lengths.unsqueeze(1)).unsqueeze(-1)
        return x.masked_fill(~keep, 0.0)


def encoder_input(spec: Mapping[str, Any]) -> SherpaFeatures | SherpaFeatureAdapter:
    """The exported encoder's first module for a front-end `spec`: `SherpaFeatures` for kind "sherpa" (exact),
    else `SherpaFeatureAdapter` (approximate). Both take sherpa's raw log filterbank (``normalize_type`` "")
    and have ``sherpa_bins``, the encoder's ``feat_dim``."""
    if complete_frontend_spec(spec)["kind"] == "sherpa":
        return SherpaFeatures(spec)
    return SherpaFeatureAdapter(spec)
