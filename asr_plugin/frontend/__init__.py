"""Front ends: how audio becomes a model's features, offline and as audio arrives (`asr_plugin.frontend.online`).

A front-end spec is plain data a checkpoint stores (`spec`: its kinds, `complete_frontend_spec`,
`build_frontend`); each kind is one module: ``logmel`` (this project's log-mel with global statistics,
`logmel`), ``nemo`` (NeMo's preprocessor, `nemo`), ``sherpa`` and ``sherpa_online`` (sherpa-onnx's
kaldi-native-fbank features with every option written down once, `sherpa`). Only torch and torchaudio
compute them. See docs/data.md, "Front ends: how audio becomes features"."""

from asr_plugin.frontend.logmel import FeatureStats, GlobalNormalize, LogMelFeatures, LogMelFrontend
from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.frontend.sherpa import SherpaFbank, SherpaOnlineFbank
from asr_plugin.frontend.spec import (
    FRONTEND_KINDS,
    build_frontend,
    complete_frontend_spec,
    frontend_feature_dim,
    frontend_needs_stats,
    with_stats,
)

__all__ = [
    "FRONTEND_KINDS",
    "FeatureStats",
    "GlobalNormalize",
    "LogMelFeatures",
    "LogMelFrontend",
    "NemoMelFrontend",
    "SherpaFbank",
    "SherpaOnlineFbank",
    "build_frontend",
    "complete_frontend_spec",
    "frontend_feature_dim",
    "frontend_needs_stats",
    "with_stats",
]
