"""Transducer decoding: batched greedy search and modified beam search."""

from asr_plugin.decoding.greedy import greedy_search
from asr_plugin.decoding.hypothesis import Hypothesis, attach_text

__all__ = ["Hypothesis", "attach_text", "greedy_search"]
