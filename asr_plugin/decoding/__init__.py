"""Transducer decoding: batched label-looping greedy search, batched beam search (RNN-T and TDT) and streaming greedy
decoding, with shallow fusion (phrase boosting) in each (see docs/decoding.md and docs/streaming.md)."""

from asr_plugin.decoding.beam_search import BatchedBeamSearch, beam_search
from asr_plugin.decoding.buffered import BufferedEncoder, BufferedState, min_right_context, subsampling_factor
from asr_plugin.decoding.cache_aware import CacheAwareEncoder, CacheAwareState
from asr_plugin.decoding.confidence import ConfidenceMethod, attach_word_confidence, word_confidence
from asr_plugin.decoding.endpointing import EndpointConfig, Endpointing, EndpointRule, encoder_frame_shift
from asr_plugin.decoding.fusion import TokenScorer, WeightedScorer
from asr_plugin.decoding.greedy import greedy_search
from asr_plugin.decoding.greedy_steps import GreedyChoice, greedy_step
from asr_plugin.decoding.hypothesis import Hypothesis, Span, Timing, attach_text
from asr_plugin.decoding.interface import DecoderJoint, TransducerDecoderJoint, decoder_joint
from asr_plugin.decoding.methods import METHODS, decode
from asr_plugin.decoding.phrase_boosting import Phrase, PhraseBoosting, read_hotwords
from asr_plugin.decoding.recognizer import EncoderStream, FeatureStream, RecognizerState, Segment, StreamingRecognizer
from asr_plugin.decoding.streaming_greedy import GreedyState, StreamingGreedyDecoder
from asr_plugin.decoding.timestamps import attach_timing, hypothesis_timing, joined_timing

__all__ = [
    "BatchedBeamSearch",
    "METHODS",
    "BufferedEncoder",
    "BufferedState",
    "CacheAwareEncoder",
    "CacheAwareState",
    "ConfidenceMethod",
    "DecoderJoint",
    "EncoderStream",
    "EndpointConfig",
    "EndpointRule",
    "Endpointing",
    "FeatureStream",
    "GreedyChoice",
    "GreedyState",
    "Phrase",
    "PhraseBoosting",
    "Hypothesis",
    "RecognizerState",
    "Segment",
    "Span",
    "StreamingGreedyDecoder",
    "StreamingRecognizer",
    "Timing",
    "TokenScorer",
    "TransducerDecoderJoint",
    "WeightedScorer",
    "attach_text",
    "attach_timing",
    "attach_word_confidence",
    "beam_search",
    "decode",
    "decoder_joint",
    "encoder_frame_shift",
    "greedy_search",
    "greedy_step",
    "hypothesis_timing",
    "joined_timing",
    "min_right_context",
    "read_hotwords",
    "subsampling_factor",
    "word_confidence",
]
