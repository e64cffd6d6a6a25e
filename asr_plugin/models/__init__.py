"""Conformer-transducer parts: encoder, predictor, joint, the composed model, and the encoder's cache-aware
streaming (`asr_plugin.models.streaming`). NeMo's log-mel front end lives in `asr_plugin.frontend` (re-exported
here, where it was first)."""

from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.models.encoder import ConformerEncoder
from asr_plugin.models.joint import Joint
from asr_plugin.models.predictor import LSTMPredictor, LSTMState
from asr_plugin.models.streaming import StreamingSetup, StreamState, encode_in_chunks
from asr_plugin.models.subsampling import Conv2dSubsampling
from asr_plugin.models.transducer import Transducer, build_transducer

__all__ = [
    "Conv2dSubsampling",
    "ConformerEncoder",
    "Joint",
    "LSTMPredictor",
    "LSTMState",
    "NemoMelFrontend",
    "StreamState",
    "StreamingSetup",
    "Transducer",
    "build_transducer",
    "encode_in_chunks",
]
