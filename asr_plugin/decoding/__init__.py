"""Transducer decoding: batched greedy search and modified beam search (see docs/decoding.md)."""

from asr_plugin.decoding.beam_search import modified_beam_search
from asr_plugin.decoding.greedy import greedy_search
from asr_plugin.decoding.hypothesis import Hypothesis, attach_text
from asr_plugin.decoding.methods import METHODS, decode

__all__ = ["METHODS", "Hypothesis", "attach_text", "decode", "greedy_search", "modified_beam_search"]
