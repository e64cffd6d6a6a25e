"""A model's front end as audio arrives: the streaming extractor of a front-end spec, and for buffered streaming
the spec without its per-utterance normalisation plus that normalisation to run on each window.

Which front ends stream exactly: ``sherpa_online`` and ``sherpa`` with ``normalize: null`` (`StreamingFbank`),
``nemo`` with ``normalize: null`` (a streaming NeMo model's ``normalize: NA``) and ``logmel`` (global statistics)
(`StreamingStft`). A per-utterance normalisation (``sherpa`` or ``nemo`` with ``per_feature``, ``nemo`` with
``all_features``) needs the whole utterance: cache-aware streaming refuses it, buffered streaming runs it on
each window as NeMo's buffered inference runs its preprocessor per buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch

from asr_plugin.frontend.nemo import normalize_utterances
from asr_plugin.frontend.online.fbank import StreamingFbank
from asr_plugin.frontend.online.frames import StreamingFrames
from asr_plugin.frontend.online.stft import StreamingStft
from asr_plugin.frontend.sherpa import SherpaFbank, normalize_per_feature
from asr_plugin.frontend.spec import build_frontend, complete_frontend_spec

WindowNormalizer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (B, W, F), (B,) -> (B, W, F)


def streaming_extractor(spec: Mapping[str, Any], device: torch.device | str = "cpu") -> StreamingFrames:
    """The streaming extractor of the front end of `spec` (built in evaluation mode on `device`). ValueError naming
    the kind and option for a front end with a per-utterance normalisation, which cannot stream."""
    spec = complete_frontend_spec(spec)
    normalize = spec["options"].get("normalize")
    if normalize is not None:
        raise ValueError(
            f"the model's front end (kind {spec['kind']!r}, normalize={normalize!r}) standardises its features over "
            "the whole utterance, which cannot be computed as audio arrives: streaming it exactly needs a front end "
            "without a per-utterance normalisation (kinds sherpa_online, logmel, or sherpa / nemo with normalize: null)"
        )
    frontend = build_frontend(spec).eval().to(device)
    return StreamingFbank(frontend) if isinstance(frontend, SherpaFbank) else StreamingStft(frontend)


def nemo_window_normalization(features: torch.Tensor, frames: torch.Tensor, normalize: str) -> torch.Tensor:
    """(B, W, F) features standardised over each window's (B,) valid frames as NeMo's preprocessor does
    (`normalize_utterances`), padded frames 0."""
    keep = (torch.arange(features.shape[1], device=features.device) < frames[:, None]).unsqueeze(-1)  # (B, W, 1)
    return normalize_utterances(features, keep, frames, normalize).masked_fill(~keep, 0.0)


def buffered_extractor(
    spec: Mapping[str, Any], device: torch.device | str = "cpu"
) -> tuple[StreamingFrames, WindowNormalizer | None]:
    """The streaming extractor of `spec`'s features before its per-utterance normalisation, and that
    normalisation as a function of a window's features and lengths (None when the front end has none)."""
    spec = complete_frontend_spec(spec)
    normalize = spec["options"].get("normalize")
    if normalize is None:
        return streaming_extractor(spec, device), None
    raw = {**spec, "options": {**spec["options"], "normalize": None}}
    if spec["kind"] == "sherpa":
        return streaming_extractor(raw, device), normalize_per_feature
    return streaming_extractor(raw, device), partial(nemo_window_normalization, normalize=normalize)
