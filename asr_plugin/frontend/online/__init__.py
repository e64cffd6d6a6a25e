"""Front ends as audio arrives, batched over streams: the extractor of a spec (`extractors`), the frames every
extractor shares (`frames`), sherpa-onnx's filterbank (`fbank`) and the STFT front ends (`stft`) piece by
piece, and the feature frames an encoder stream holds (`feature_buffer`) in left-aligned per-stream buffers
(`ragged`). See docs/streaming.md."""

from asr_plugin.frontend.online.extractors import buffered_extractor, streaming_extractor
from asr_plugin.frontend.online.fbank import StreamingFbank
from asr_plugin.frontend.online.feature_buffer import FeatureBuffer
from asr_plugin.frontend.online.frames import StreamingFrames
from asr_plugin.frontend.online.stft import StreamingStft

__all__ = [
    "FeatureBuffer",
    "StreamingFbank",
    "StreamingFrames",
    "StreamingStft",
    "buffered_extractor",
    "streaming_extractor",
]
