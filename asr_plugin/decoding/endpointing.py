"""Endpointing by trailing blanks: sherpa-onnx's three rules, on the state of a `StreamingGreedyDecoder`.

sherpa-onnx (``sherpa-onnx/csrc/endpoint.h``, ``endpoint.cc``) ends a segment when any of three rules holds,
each "the segment's trailing silence is at least S seconds and the segment at least L seconds long", the first
and third also without any token in the segment: by default rule 1, 2.4 s of silence even when nothing was
decoded; rule 2, 1.2 s of silence after a token; rule 3, a segment of 20 s, whatever it holds. Silence is the
run of blanks since the segment's last token (`GreedyState.trailing_blank_frames`; sherpa-onnx's NeMo decoder
counts ``num_trailing_blanks`` the same way for RNN-T), lengths are encoder frames times the frame shift
(`encoder_frame_shift`). The rules are checked after a chunk has been decoded, as sherpa-onnx checks them after
each ``DecodeStreams``; a segment then ends at the end of that chunk (`StreamingGreedyDecoder.reset`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from asr_plugin.decoding.streaming_greedy import GreedyState
from asr_plugin.decoding.validation import check_int, check_seconds


@dataclass(frozen=True)
class EndpointRule:
    """One rule: the segment ends once its trailing silence is >= `min_trailing_silence` seconds and it is
    >= `min_utterance_length` seconds long, and, with `must_contain_nonsilence`, it has emitted a token."""

    must_contain_nonsilence: bool
    min_trailing_silence: float
    min_utterance_length: float

    def __post_init__(self) -> None:
        for name in ("min_trailing_silence", "min_utterance_length"):
            check_seconds(f"EndpointRule.{name}", getattr(self, name))


@dataclass(frozen=True)
class EndpointConfig:
    """sherpa-onnx's three rules, its defaults (``EndpointConfig()`` in endpoint.h)."""

    rule1: EndpointRule = field(default_factory=lambda: EndpointRule(False, 2.4, 0.0))
    rule2: EndpointRule = field(default_factory=lambda: EndpointRule(True, 1.2, 0.0))
    rule3: EndpointRule = field(default_factory=lambda: EndpointRule(False, 0.0, 20.0))

    @property
    def rules(self) -> tuple[EndpointRule, EndpointRule, EndpointRule]:
        return self.rule1, self.rule2, self.rule3


def encoder_frame_shift(subsampling_factor: int, hop_length: int, sample_rate: int) -> float:
    """Seconds per encoder frame: the front end's hop (samples) times the encoder's subsampling (4 x 160 samples
    at 16 kHz: 0.04 s)."""
    for name, value in (
        ("subsampling_factor", subsampling_factor),
        ("hop_length", hop_length),
        ("sample_rate", sample_rate),
    ):
        check_int(name, value, 1)
    return subsampling_factor * hop_length / sample_rate


class Endpointing:
    """Decides, after each chunk, which streams' segments end.

    Durations are compared in whole encoder frames: a rule of S seconds needs ceil(S / frame_shift) frames
    (60 for 2.4 s at 40 ms), so float rounding of seconds never moves an endpoint by a frame.

    Args:
        frame_shift: seconds per encoder frame (`encoder_frame_shift`).
        config: the three rules (sherpa-onnx's defaults).
    """

    def __init__(self, frame_shift: float, config: EndpointConfig | None = None) -> None:
        check_seconds("frame_shift", frame_shift, positive=True)
        self.frame_shift = float(frame_shift)
        self.config = EndpointConfig() if config is None else config
        self.thresholds = [
            (
                rule.must_contain_nonsilence,
                self.frames(rule.min_trailing_silence),
                self.frames(rule.min_utterance_length),
            )
            for rule in self.config.rules
        ]

    def frames(self, seconds: float) -> int:
        """The whole encoder frames `seconds` take (rounded up; 1e-6 frames of float error forgiven)."""
        return math.ceil(round(seconds / self.frame_shift, 6))

    def rules_fired(self, state: GreedyState) -> torch.Tensor:
        """(B,) int64: the first rule (1, 2, 3) that holds for each stream's segment, 0 where none does."""
        trailing = state.trailing_blank_frames()  # (B,)
        length = state.frames_done - state.segment_start  # (B,)
        has_tokens = state.has_tokens()
        fired = torch.zeros_like(length)
        for number, (needs_token, min_silence, min_length) in reversed(list(enumerate(self.thresholds, 1))):
            holds = (trailing >= min_silence) & (length >= min_length) & (has_tokens | (not needs_token))
            fired = torch.where(holds, number, fired)
        return fired

    def __call__(self, state: GreedyState) -> torch.Tensor:
        """(B,) bool: whether each stream's segment has reached an endpoint."""
        return self.rules_fired(state) > 0
