"""The front end of kind "sherpa_online" against kaldi-native-fbank run with the options sherpa-onnx's online
recogniser sets for NeMo transducers (Hann window, 0-8000 Hz, no normalisation); `StreamingFbank` fed audio in
pieces gives exactly the whole-utterance frames; the spec and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from frontend_audio import audio_batch, speechlike

from asr_plugin.frontend.online.fbank import StreamingFbank
from asr_plugin.frontend.sherpa import SherpaFbank, SherpaOnlineFbank
from asr_plugin.frontend.spec import build_frontend, complete_frontend_spec, frontend_feature_dim

knf = pytest.importorskip("kaldi_native_fbank")

# one frame (80 samples), shorter than a window (reflected more than once), a window plus a bit, 1 s, and lengths
# that end just before / after a frame boundary
LENGTHS = (80, 159, 250, 401, 16000, 4519, 4521)
PIECES = (1, 7, 160, 1600, 2401)  # samples per piece: 1600 = 100 ms (1 on short audio only: one step a sample)


def online_options(num_bins: int = 80):
    """kaldi-native-fbank's options as sherpa-onnx 2.0.1 sets them for a NeMo transducer's OnlineRecognizer
    (FeatureExtractorConfig defaults, then OnlineRecognizerTransducerNeMoImpl::PostInit)."""
    options = knf.FbankOptions()
    frame = options.frame_opts
    frame.samp_freq, frame.frame_shift_ms, frame.frame_length_ms = 16000, 10.0, 25.0
    frame.dither, frame.preemph_coeff, frame.remove_dc_offset = 0.0, 0.97, False
    frame.window_type, frame.round_to_power_of_two, frame.snip_edges = "hann", True, False
    mel = options.mel_opts
    mel.num_bins, mel.low_freq, mel.high_freq, mel.is_librosa = num_bins, 0.0, 8000.0, True
    return options


def knf_features(waveform: np.ndarray, num_bins: int = 80, piece: int | None = None) -> torch.Tensor:
    """(T, F) kaldi-native-fbank's OnlineFbank frames of the whole waveform (fed in `piece`-sample pieces)."""
    fbank = knf.OnlineFbank(online_options(num_bins))
    step = piece or len(waveform)
    for start in range(0, len(waveform), step):
        fbank.accept_waveform(16000, waveform[start : start + step].tolist())
    fbank.input_finished()
    return torch.tensor(np.stack([fbank.get_frame(i) for i in range(fbank.num_frames_ready)]))


@pytest.mark.parametrize("num_bins", [80, 128])
def test_features_equal_kaldi_native_fbank_with_sherpa_online_options(num_bins: int) -> None:
    waveforms = [speechlike(n, seed) for seed, n in enumerate(LENGTHS)]
    frontend = build_frontend({"kind": "sherpa_online", "options": {"num_mel_bins": num_bins}}).eval()
    features, frames = frontend(*audio_batch(waveforms))
    for i, waveform in enumerate(waveforms):
        reference = knf_features(waveform, num_bins)  # (T, F)
        assert int(frames[i]) == reference.shape[0] == (len(waveform) + 80) // 160
        # float32 rounding only; the offline options (Povey window, 7600 Hz) are 0.1 or more off
        assert float((features[i, : int(frames[i])] - reference).abs().max()) < 1e-3, len(waveform)
        assert bool((features[i, int(frames[i]) :] == 0).all())
    offline, _ = SherpaFbank(num_bins, normalize=None).eval()(*audio_batch(waveforms[4:5]))
    assert float((offline[0] - knf_features(waveforms[4], num_bins)).abs().max()) > 0.1


@pytest.mark.parametrize("piece", PIECES)
def test_streamed_frames_equal_the_whole_utterance_frames(piece: int) -> None:
    """Streams of different lengths fed `piece` samples at a time (the last piece shorter), then flushed."""
    sizes = (919, 401, 159, 650) if piece == 1 else (4519, 401, 159, 6000)
    waveforms = [speechlike(n, 10 + n) for n in (*sizes, 0)]
    frontend = SherpaOnlineFbank().eval()
    audio, lengths = audio_batch(waveforms)
    whole, whole_frames = frontend(audio[:4], lengths[:4])
    streaming = StreamingFbank(frontend)
    state = streaming.initial_state(len(waveforms))
    got: list[list[torch.Tensor]] = [[] for _ in waveforms]
    for start in range(0, int(lengths.max()), piece):
        counts = (lengths - start).clamp(0, piece)
        features, frames, state = streaming.accept(audio[:, start : start + piece], counts, state)
        for b in range(len(waveforms)):
            got[b].append(features[b, : frames[b]])
            # a frame is given out once all its samples are in (and not before)
            assert int(state.frames_done[b]) == max(0, (int(state.received[b]) - 280) // 160 + 1)
    features, frames, state = streaming.flush(state)
    for b in range(len(waveforms)):
        got[b].append(features[b, : frames[b]])
    assert state.frames_done.tolist() == [(n + 80) // 160 for n in lengths.tolist()]
    for b in range(4):
        streamed = torch.cat(got[b])
        assert streamed.shape[0] == int(whole_frames[b])
        torch.testing.assert_close(streamed, whole[b, : whole_frames[b]], atol=1e-5, rtol=1e-5)
        # and kaldi-native-fbank's own OnlineFbank fed the same pieces
        assert float((streamed - knf_features(waveforms[b], piece=piece)).abs().max()) < 1e-3


def test_streams_keep_only_the_history_a_frame_needs() -> None:
    streaming = StreamingFbank(SherpaOnlineFbank().eval())
    state = streaming.initial_state(1)
    waveform = torch.from_numpy(speechlike(16000, 3))[None]
    for start in range(0, 16000, 1600):
        _, _, state = streaming.accept(waveform[:, start : start + 1600], torch.tensor([1600]), state)
        kept = int(state.received[0] - state.samples_start[0])
        # from the first sample of the next frame on: fewer than a window plus a piece
        assert int(state.samples_start[0]) == max(0, 160 * int(state.frames_done[0]) - 120)
        assert kept < 400 + 1600


def test_flushing_some_streams_and_refusals() -> None:
    frontend = SherpaOnlineFbank().eval()
    streaming = StreamingFbank(frontend)
    state = streaming.initial_state(2)
    audio = torch.from_numpy(np.stack([speechlike(1000, 1), speechlike(1000, 2)]))
    _, _, state = streaming.accept(audio, torch.tensor([1000, 1000]), state)
    features, frames, state = streaming.flush(state, torch.tensor([True, False]))
    assert frames.tolist() == [(1080 // 160) - 5, 0]  # 5 frames were ready before the flush
    with pytest.raises(ValueError, match="stream 0 has ended: it takes no more audio"):
        streaming.accept(audio, torch.tensor([10, 10]), state)
    _, _, state = streaming.accept(audio, torch.tensor([0, 10]), state)  # the other stream goes on
    with pytest.raises(ValueError, match="audio has 3 streams, the state 2"):
        streaming.accept(torch.zeros(3, 5), torch.tensor([5, 5, 5]), state)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 5\]"):
        streaming.accept(torch.zeros(2, 5), torch.tensor([6, 0]), state)
    with pytest.raises(ValueError, match="normalize='per_feature' standardises each bin over the whole utterance"):
        StreamingFbank(SherpaFbank())
    with pytest.raises(TypeError, match="not LogMelFeatures"):
        StreamingFbank(build_frontend({"kind": "logmel", "mean": [0.0] * 80, "std": [1.0] * 80}).features)


def test_spec_completion_and_refusals() -> None:
    spec = complete_frontend_spec({"kind": "sherpa_online"})
    assert spec == {"kind": "sherpa_online", "options": {"num_mel_bins": 80, "dither": 0.0}}
    assert frontend_feature_dim({"kind": "sherpa_online", "options": {"num_mel_bins": 64.0}}) == 64
    assert isinstance(build_frontend(spec), SherpaOnlineFbank)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['normalize'\]"):
        complete_frontend_spec({"kind": "sherpa_online", "options": {"normalize": "per_feature"}})
    with pytest.raises(ValueError, match="kind 'sherpa_online': option num_mel_bins=0"):
        complete_frontend_spec({"kind": "sherpa_online", "options": {"num_mel_bins": 0}})
