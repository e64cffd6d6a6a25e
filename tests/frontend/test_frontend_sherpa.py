"""The front end of kind "sherpa" against kaldi-native-fbank run with sherpa-onnx's NeMo-transducer options
(what sherpa-onnx itself links): features, frame counts, edges, normalisation; the spec and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from frontend_audio import audio_batch, speechlike

from asr_plugin.frontend.sherpa import SherpaFbank
from asr_plugin.frontend.spec import build_frontend, complete_frontend_spec, frontend_feature_dim, frontend_needs_stats

knf = pytest.importorskip("kaldi_native_fbank")

from asr_plugin.export.sherpa_decode import sherpa_features  # noqa: E402 - needs kaldi-native-fbank

# lengths around the edge cases: one frame (80 samples), shorter than a window (reflected more than once),
# a window plus a bit, and a second of audio
LENGTHS = (80, 159, 250, 401, 16000)


@pytest.mark.parametrize("normalize", [None, "per_feature"])
def test_features_equal_kaldi_native_fbank_with_sherpa_options(normalize):
    waveforms = [speechlike(n, seed) for seed, n in enumerate(LENGTHS)]
    frontend = build_frontend({"kind": "sherpa", "options": {"normalize": normalize}}).eval()
    features, frames = frontend(*audio_batch(waveforms))
    for i, waveform in enumerate(waveforms):
        reference = sherpa_features(waveform, 80, normalize or "")  # (T, F)
        assert int(frames[i]) == reference.shape[0] == (len(waveform) + 80) // 160
        ours = features[i, : int(frames[i])]
        # float32 rounding only (about 3e-5 here, 3e-4 on speech); a window one sample late is 1e-2 off, a
        # Hann window or filters up to 8 kHz 0.1 or more
        assert float((ours - reference).abs().max()) < 1e-3, (len(waveform), normalize)
        assert bool((features[i, int(frames[i]) :] == 0).all())  # padding frames are 0


def test_digital_silence_gets_the_float32_floor_and_stays_finite():
    silence = np.zeros(1600, dtype=np.float32)
    raw, _ = build_frontend({"kind": "sherpa", "options": {"normalize": None}}).eval()(*audio_batch([silence]))
    assert torch.allclose(raw, sherpa_features(silence, 80)[None])
    assert torch.allclose(raw, torch.full_like(raw, float(np.log(np.finfo(np.float32).eps))))
    normalised, _ = build_frontend({"kind": "sherpa"}).eval()(*audio_batch([silence]))
    assert bool((normalised == 0).all())  # (x - mean) / (0 + 1e-5), as sherpa


def test_a_batch_gives_each_utterance_its_own_features():
    waveforms = [speechlike(n, 7 + n) for n in (3000, 12345, 801)]
    frontend = SherpaFbank(num_mel_bins=40).eval()
    batched, frames = frontend(*audio_batch(waveforms))
    for i, waveform in enumerate(waveforms):
        alone, alone_frames = frontend(*audio_batch([waveform]))
        assert int(alone_frames) == int(frames[i])
        assert torch.allclose(batched[i, : int(frames[i])], alone[0], atol=1e-5)


def test_dither_only_in_training_mode():
    waveform = speechlike(4000, 3)
    frontend = SherpaFbank(dither=1e-3)
    eval_features, _ = frontend.eval()(*audio_batch([waveform]))
    assert torch.equal(eval_features, frontend(*audio_batch([waveform]))[0])
    assert not torch.allclose(frontend.train()(*audio_batch([waveform]))[0], eval_features)


def test_spec_completion_and_refusals_name_the_option():
    spec = complete_frontend_spec({"kind": "sherpa"})
    assert spec == {"kind": "sherpa", "options": {"num_mel_bins": 80, "normalize": "per_feature", "dither": 0.0}}
    assert frontend_feature_dim({"kind": "sherpa", "options": {"num_mel_bins": 64}}) == 64
    assert not frontend_needs_stats(spec) and complete_frontend_spec(spec) == spec
    with pytest.raises(ValueError, match="option normalize='all_features'"):
        complete_frontend_spec({"kind": "sherpa", "options": {"normalize": "all_features"}})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['preemphasis'\]"):
        complete_frontend_spec({"kind": "sherpa", "options": {"preemphasis": 0.9}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['mean'\]"):
        complete_frontend_spec({"kind": "sherpa", "mean": [0.0]})
    with pytest.raises(ValueError, match="option num_mel_bins=0"):
        complete_frontend_spec({"kind": "sherpa", "options": {"num_mel_bins": 0}})
    with pytest.raises(ValueError, match="utterance 1 has 79 samples"):
        SherpaFbank()(torch.zeros(2, 200), torch.tensor([200, 79]))
