"""The front ends of kinds "nemo" (NeMo's preprocessor with normalize: NA, a streaming NeMo model's) and "logmel"
computed as audio arrives (`StreamingStft`): fed in pieces of several sizes, the frames equal the whole-utterance
front end's, each given once its window has arrived; `streaming_extractor` picks the extractor of a spec and refuses
a per-utterance normalisation by name; `buffered_extractor` splits that normalisation off for buffered streaming."""

from __future__ import annotations

import pytest
import torch
from frontend_audio import audio_batch, speechlike

from asr_plugin.frontend.online.extractors import buffered_extractor, streaming_extractor
from asr_plugin.frontend.online.fbank import StreamingFbank
from asr_plugin.frontend.online.stft import StreamingStft
from asr_plugin.frontend.sherpa import normalize_per_feature
from asr_plugin.frontend.spec import build_frontend

PIECES = (1, 7, 160, 1600, 2401)  # samples per piece (1: on short audio only)
NEMO = {"kind": "nemo", "options": {"normalize": None, "dither": 0.0}}  # NeMo's preprocessor, normalize: NA
NEMO_ODD = {  # another window, FFT size, hop and magnitude: the extractor reads them from the front end
    "kind": "nemo",
    "options": {
        "normalize": None,
        "num_mel_bins": 64,
        "n_fft": 400,
        "win_length": 320,
        "hop_length": 128,
        "window": "hamming",
        "preemphasis": 0.9,
        "mag_power": 1.0,
        "log_guard_type": "clamp",
    },
}
LOGMEL = {"kind": "logmel", "mean": [0.5 * i for i in range(80)], "std": [1.0 + 0.1 * i for i in range(80)]}
SPECS = {"nemo": NEMO, "nemo_odd": NEMO_ODD, "logmel": LOGMEL}


def stream(extractor, audio, lengths, piece):
    """Every stream's frames, fed `piece` samples at a time then flushed; checks on the way that a frame comes
    once its samples are all in, never before."""
    state = extractor.initial_state(len(lengths))
    got = [[] for _ in range(len(lengths))]
    for start in range(0, int(lengths.max()), piece):
        counts = (lengths - start).clamp(0, piece)
        features, frames, state = extractor.accept(audio[:, start : start + piece], counts, state)
        for b in range(len(lengths)):
            got[b].append(features[b, : frames[b]])
        if isinstance(extractor, StreamingStft):  # frame m: the n_fft samples centred on hop * m
            frontend = extractor.frontend
            ready = (state.received - frontend.n_fft // 2).div(frontend.hop_length, rounding_mode="floor") + 1
            expected = torch.minimum(ready, frontend.num_frames(state.received)).clamp(min=0)
            assert state.frames_done.tolist() == expected.tolist()
    features, frames, state = extractor.flush(state)
    for b in range(len(lengths)):
        got[b].append(features[b, : frames[b]])
    return [torch.cat(parts) for parts in got], state


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("piece", PIECES)
def test_streamed_frames_equal_the_whole_utterance_frames(kind: str, piece: int) -> None:
    sizes = (919, 401, 650, 333) if piece == 1 else (4519, 401, 6000, 16000)
    waveforms = [speechlike(n, 20 + n) for n in sizes]
    frontend = build_frontend(SPECS[kind]).eval()
    audio, lengths = audio_batch(waveforms)
    whole, whole_frames = frontend(audio, lengths)
    extractor = streaming_extractor(SPECS[kind])
    assert isinstance(extractor, StreamingStft)
    streamed, state = stream(extractor, audio, lengths, piece)
    assert state.frames_done.tolist() == whole_frames.tolist()
    for b in range(len(sizes)):
        assert streamed[b].shape[0] == int(whole_frames[b])
        torch.testing.assert_close(streamed[b], whole[b, : whole_frames[b]], atol=2e-5, rtol=1e-5)


def test_streams_keep_only_the_history_a_frame_needs() -> None:
    extractor = streaming_extractor(NEMO)
    state = extractor.initial_state(1)
    waveform = torch.from_numpy(speechlike(16000, 3))[None]
    for start in range(0, 16000, 1600):
        _, _, state = extractor.accept(waveform[:, start : start + 1600], torch.tensor([1600]), state)
        # from the next frame's window (centred on 160 m, 256 samples before it) and the sample before on
        assert int(state.samples_start[0]) == max(0, 160 * int(state.frames_done[0]) - 320)
        assert int(state.received[0] - state.samples_start[0]) < 320 + 256 + 1600


def test_the_extractor_of_each_kind_and_the_refusals() -> None:
    assert isinstance(streaming_extractor({"kind": "sherpa_online"}), StreamingFbank)
    assert isinstance(streaming_extractor({"kind": "sherpa", "options": {"normalize": None}}), StreamingFbank)
    for spec in ({"kind": "sherpa"}, {"kind": "nemo"}, {"kind": "nemo", "options": {"normalize": "all_features"}}):
        with pytest.raises(ValueError, match=f"kind '{spec['kind']}', normalize='.*'.* standardises its features over"):
            streaming_extractor(spec)
    with pytest.raises(ValueError, match="training mode"):
        StreamingStft(build_frontend(NEMO))
    with pytest.raises(ValueError, match="normalize='per_feature' standardises"):
        StreamingStft(build_frontend({"kind": "nemo"}).eval())
    with pytest.raises(TypeError, match="not SherpaFbank"):
        StreamingStft(build_frontend({"kind": "sherpa"}))


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "sherpa"},
        {"kind": "nemo", "options": {"dither": 0.0}},
        {"kind": "nemo", "options": {"normalize": "all_features"}},
    ],
)
def test_buffered_streaming_normalises_each_window_as_the_front_end_normalises_an_utterance(spec) -> None:
    """The raw frames streamed, then normalised as one window: the front end's own whole-utterance features."""
    waveforms = [speechlike(n, n) for n in (4519, 16000)]
    audio, lengths = audio_batch(waveforms)
    frontend = build_frontend(spec).eval()
    whole, frames = frontend(audio, lengths)
    extractor, normalize = buffered_extractor(spec)
    streamed, _ = stream(extractor, audio, lengths, 1600)
    raw = torch.nn.utils.rnn.pad_sequence(streamed, batch_first=True)
    torch.testing.assert_close(normalize(raw, frames), whole, atol=1e-4, rtol=1e-4)
    assert (normalize is normalize_per_feature) == (spec["kind"] == "sherpa")
    assert buffered_extractor({"kind": "sherpa_online"})[1] is None
