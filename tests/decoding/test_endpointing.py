"""Endpointing: sherpa-onnx's three rules fire at the frame they should on scripted blank/token sequences, at the
end of the chunk that reaches it; a reset starts the count again."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_transducer

from asr_plugin.decoding import EndpointConfig, Endpointing, EndpointRule, StreamingGreedyDecoder, encoder_frame_shift

VOCAB = 5


def scripted_model(lattice: str = "rnnt", duration: int = 1):
    """A transducer whose joint ignores the predictor and emits the class of the one-hot encoder frame it reads
    (class 0: blank); TDT: every choice with `duration`."""
    record = {"kind": "tdt", "durations": [0, 1, 2, 3, 4]} if lattice == "tdt" else None
    model = tiny_transducer(VOCAB, lattice=record)
    joint = model.joint
    with torch.no_grad():
        for linear in (joint.encoder_proj, joint.predictor_proj, joint.output):
            linear.weight.zero_()
            linear.bias.zero_()
        for k in range(VOCAB):
            joint.encoder_proj.weight[k, k] = 10.0
            joint.output.weight[k, k] = 10.0
        if lattice == "tdt":
            joint.output.bias[VOCAB + duration] = 5.0
    return model


def frames_of(classes: list[int], model) -> torch.Tensor:
    """(1, T, H_e) one-hot encoder frames of the given classes."""
    frames = torch.zeros(1, len(classes), model.encoder.output_dim)
    frames[0, torch.arange(len(classes)), torch.tensor(classes)] = 1.0
    return frames


def first_endpoint(model, classes: list[int], endpointing: Endpointing, chunk: int = 1):
    """Feeds the frames `chunk` at a time; (frames decoded, rule) at the first endpoint, or None."""
    decoder = StreamingGreedyDecoder(model, max_symbols_per_frame=1)
    state = decoder.initial_state(1)
    frames = frames_of(classes, model)
    for start in range(0, len(classes), chunk):
        piece = frames[:, start : start + chunk]
        state = decoder.step(piece, torch.tensor([piece.shape[1]]), state)
        rule = int(endpointing.rules_fired(state)[0])
        if rule:
            return int(state.frames_done[0]), rule
    return None


def test_defaults_are_sherpa_onnx_rules_and_the_frame_shift() -> None:
    config = EndpointConfig()
    assert config.rule1 == EndpointRule(False, 2.4, 0.0)
    assert config.rule2 == EndpointRule(True, 1.2, 0.0)
    assert config.rule3 == EndpointRule(False, 0.0, 20.0)
    assert encoder_frame_shift(4, 160, 16000) == pytest.approx(0.04)
    assert encoder_frame_shift(8, 160, 16000) == pytest.approx(0.08)
    endpointing = Endpointing(0.04)
    assert [t[1:] for t in endpointing.thresholds] == [(60, 0), (30, 0), (0, 500)]


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_rule1_fires_after_2_4_s_of_blanks_without_any_token(lattice: str) -> None:
    model = scripted_model(lattice)
    assert first_endpoint(model, [0] * 100, Endpointing(0.04)) == (60, 1)
    assert first_endpoint(model, [0] * 100, Endpointing(0.08)) == (30, 1)
    assert first_endpoint(model, [0] * 59, Endpointing(0.04)) is None


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_rule2_fires_1_2_s_after_the_last_token(lattice: str) -> None:
    model = scripted_model(lattice)
    speech = [0] * 10 + [2, 3, 0, 4]  # the last token at frame 13; its frame is left after it (cap 1, duration 1)
    assert first_endpoint(model, speech + [0] * 100, Endpointing(0.04)) == (14 + 30, 2)
    # a token inside the silence starts it again
    assert first_endpoint(model, speech + [0] * 20 + [1] + [0] * 100, Endpointing(0.04)) == (14 + 21 + 30, 2)


def test_rule2_counts_the_frames_a_tdt_token_covers_as_speech() -> None:
    model = scripted_model("tdt", duration=4)  # every token and blank moves on 4 frames
    classes = [3] + [0] * 100  # the token at frame 0 covers frames 0-3, the blanks after it 4, 8, ...
    assert first_endpoint(model, classes, Endpointing(0.04)) == (4 + 30, 2)


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_rule3_fires_at_20_s_of_speech(lattice: str) -> None:
    model = scripted_model(lattice)
    speech = [1, 2, 3, 4] * 200
    assert first_endpoint(model, speech, Endpointing(0.04)) == (500, 3)
    assert first_endpoint(model, speech, Endpointing(0.08)) == (250, 3)


def test_an_endpoint_is_found_at_the_end_of_the_chunk_that_reaches_it() -> None:
    model = scripted_model()
    assert first_endpoint(model, [0] * 100, Endpointing(0.04), chunk=7) == (63, 1)
    assert first_endpoint(model, [0] * 100, Endpointing(0.04), chunk=4) == (60, 1)


@pytest.mark.parametrize("lattice", ["rnnt", "tdt"])
def test_reset_starts_a_new_segment_and_its_count(lattice: str) -> None:
    model = scripted_model(lattice)
    decoder = StreamingGreedyDecoder(model, max_symbols_per_frame=1)
    endpointing = Endpointing(0.04)
    classes = [1, 2] + [0] * 40 + [3, 0, 4] + [0] * 100  # two streams: this one and all blanks
    frames = torch.cat([frames_of(classes, model), frames_of([0] * len(classes), model)])
    state, endpoints, segments = decoder.initial_state(2), [], []
    for t in range(len(classes)):
        state = decoder.step(frames[:, t : t + 1], torch.tensor([1, 1]), state)
        fired = endpointing.rules_fired(state)
        if bool(fired.any()):
            for b in fired.nonzero().squeeze(1).tolist():
                endpoints.append((b, t + 1, int(fired[b])))
                segments.append((b, decoder.hypotheses(state)[b].tokens))
            state = decoder.reset(state, fired > 0)
    # stream 0: tokens at 0, 1 -> rule 2 at 2 + 30; then frames 32-41 blanks, tokens at 42 and 44 -> rule 2 at
    # 45 + 30; then 60 frames of blanks without a token -> rule 1
    assert [e for e in endpoints if e[0] == 0] == [(0, 32, 2), (0, 75, 2), (0, 135, 1)]
    assert [s for b, s in segments if b == 0] == [[1, 2], [3, 4], []]
    assert [e for e in endpoints if e[0] == 1] == [(1, 60, 1), (1, 120, 1)]


def test_bad_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="frame_shift=0"):
        Endpointing(0)
    with pytest.raises(ValueError, match="EndpointRule.min_trailing_silence=-1"):
        EndpointRule(True, -1, 0)
    with pytest.raises(ValueError, match="subsampling_factor=0"):
        encoder_frame_shift(0, 160, 16000)
