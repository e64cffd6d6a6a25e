"""What live audio meets on its way into a streaming recogniser (`asr_plugin.audio.pieces`, through
`StreamingFrames.accept`): NaN refused by stream and sample before it reaches any cache, integer PCM scaled as
soundfile reads it, a peak far above 1 warned about once, and another sample rate resampled."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import soundfile as sf
import torch
from tiny_models import tiny_transducer

from asr_plugin.decoding import BufferedEncoder, StreamingRecognizer
from asr_plugin.frontend.online.fbank import StreamingFbank
from asr_plugin.frontend.sherpa import SherpaOnlineFbank

BINS = 16  # tiny_transducer's input_dim


def session() -> StreamingRecognizer:
    model = tiny_transducer(attention="rel_pos", subsampling="striding")
    return StreamingRecognizer(
        model, BufferedEncoder(model, 16, 400, 400), features=StreamingFbank(SherpaOnlineFbank(BINS).eval())
    )


def frames(pieces: list[torch.Tensor], sample_rate: int | None = None) -> torch.Tensor:
    """The frames of one stream fed `pieces` ((1, S) each) at `sample_rate`, then flushed."""
    fbank = StreamingFbank(SherpaOnlineFbank(BINS).eval())
    state, out = fbank.initial_state(1), []
    for piece in pieces:
        new, counts, state = fbank.accept(piece, torch.tensor([piece.shape[1]]), state, sample_rate)
        out.append(new[0, : counts[0]])
    new, counts, state = fbank.flush(state)
    return torch.cat([*out, new[0, : counts[0]]])


def test_a_nan_piece_is_refused_naming_the_stream_and_the_sample() -> None:
    recognizer = session()
    state = recognizer.initial_state(2)
    audio = torch.zeros(2, 160)
    audio[1, 37] = float("nan")
    with pytest.raises(ValueError, match=r"audio piece of stream 1: sample 37 of its 160 new samples is nan"):
        recognizer.accept(audio, torch.tensor([160, 160]), state)
    audio[1, 37] = float("inf")
    with pytest.raises(ValueError, match=r"stream 1: sample 37 .* is inf"):
        recognizer.accept(audio, torch.tensor([160, 160]), state)
    audio[1, 37] = float("nan")
    recognizer.accept(audio, torch.tensor([160, 30]), state)  # past stream 1's new samples: padding, not audio


def test_int16_pcm_is_scaled_as_soundfile_reads_it(tmp_path) -> None:
    """The reference: soundfile's own float reading of the same 16-bit file."""
    rng = np.random.default_rng(0)
    sf.write(tmp_path / "a.wav", rng.normal(0, 0.2, 8000).clip(-1, 1), 16000, subtype="PCM_16")
    pcm = torch.from_numpy(sf.read(tmp_path / "a.wav", dtype="int16")[0])[None]
    floats = torch.from_numpy(sf.read(tmp_path / "a.wav", dtype="float32")[0])[None]
    assert torch.equal(frames(list(pcm.split(1600, dim=1))), frames(list(floats.split(1600, dim=1))))
    with pytest.raises(TypeError, match=r"dtype torch\.int64: give float samples in \[-1, 1\] or integer PCM"):
        frames([pcm.long()])


def test_a_peak_far_above_one_warns_once() -> None:
    recognizer = session()
    state = recognizer.initial_state(1)
    loud = torch.randn(1, 1600, generator=torch.Generator().manual_seed(0)) * 3000  # int16 values as floats
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default: once per place
        for _ in range(3):
            state = recognizer.accept(loud, torch.tensor([1600]), state)
    assert [str(w.message)[:27] for w in caught] == ["audio pieces peak above 2: "]


def test_audio_at_another_rate_is_resampled_to_the_front_ends() -> None:
    """A tone recorded at 8 kHz, in 100 ms pieces, gives the frames of the same tone recorded at 16 kHz where its
    energy is (each piece is resampled on its own: its edges add a faint click in the empty bins)."""

    def tone(rate: int) -> torch.Tensor:
        return (0.3 * torch.sin(2 * torch.pi * 440 * torch.arange(rate) / rate))[None].float()

    at_8k = frames(list(tone(8000).split(800, dim=1)), sample_rate=8000)
    at_16k = frames(list(tone(16000).split(1600, dim=1)))
    assert at_8k.shape == at_16k.shape
    tone_bins = at_16k.mean(0) > at_16k.min() + 1  # the bins the tone's energy is in (the rest: the log floor)
    assert tone_bins.sum() >= 2 and (at_8k - at_16k)[2:-2, tone_bins].abs().max() < 0.05
    unscaled = frames(list(tone(8000).split(800, dim=1)))  # taken as 16 kHz: half as long, an octave higher
    assert unscaled.shape[0] < at_16k.shape[0] * 0.6
    with pytest.raises(ValueError, match=r"sample_rate=0: the pieces' rate in Hz"):
        frames([tone(8000)], sample_rate=0)


def test_max_streams_caps_the_streams_a_recogniser_holds() -> None:
    model = tiny_transducer(attention="rel_pos", subsampling="striding")
    features = StreamingFbank(SherpaOnlineFbank(BINS).eval())
    recognizer = StreamingRecognizer(model, BufferedEncoder(model, 16, 400, 400), features=features, max_streams=4)
    assert recognizer.initial_state(4).ended.shape == (4,)
    with pytest.raises(ValueError, match=r"5 streams: this recogniser takes at most max_streams=4"):
        recognizer.initial_state(5)
