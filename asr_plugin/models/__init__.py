"""Conformer-transducer parts: encoder, predictor, joint, the composed model, and NeMo's log-mel front end."""

from asr_plugin.models.encoder import ConformerEncoder
from asr_plugin.models.frontend import NemoMelFrontend
from asr_plugin.models.joint import Joint
from asr_plugin.models.predictor import LSTMPredictor, LSTMState
from asr_plugin.models.subsampling import Conv2dSubsampling
from asr_plugin.models.transducer import Transducer, build_transducer

__all__ = [
    "Conv2dSubsampling",
    "ConformerEncoder",
    "Joint",
    "LSTMPredictor",
    "LSTMState",
    "NemoMelFrontend",
    "Transducer",
    "build_transducer",
]
