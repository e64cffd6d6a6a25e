"""Audio as people record it: any sample rate (resampled once per utterance), stereo (averaged), the formats
libsndfile reads, and segments of long files read without decoding the rest."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from asr_plugin.audio import load_audio
from asr_plugin.data import ManifestEntry

TONES_HZ = (440.0, 1300.0, 2300.0)  # inside the band of every rate below: resampling must keep them


def _signal(rate: int, seconds: float, start: float = 0.0) -> np.ndarray:
    """float64 sum of tones from `start` for `seconds`, sampled at `rate`."""
    t = start + np.arange(round(seconds * rate)) / rate
    return sum(0.2 * np.sin(2 * np.pi * f * t + k) for k, f in enumerate(TONES_HZ))


@pytest.mark.parametrize("rate", [48000, 44100, 22050, 8000])
def test_a_stereo_segment_at_any_rate_is_the_same_signal_at_16khz(tmp_path, rate):
    # the channels differ by a tone their average cancels; the reference is the signal computed at 16 kHz
    seconds, offset, duration = 6.0, 2.0, 1.5  # an offset on a sample of every rate
    mono = _signal(rate, seconds)
    extra = 0.1 * np.sin(2 * np.pi * 1000 * np.arange(len(mono)) / rate)
    path = tmp_path / "long.wav"
    sf.write(str(path), np.stack([mono + extra, mono - extra], axis=1), rate, subtype="FLOAT")
    audio = load_audio(path, 16000, offset, duration)
    assert audio.dtype == torch.float32 and audio.shape == (round(duration * 16000),)
    reference = _signal(16000, duration, start=offset)
    inner = slice(64, -64)  # the resampler's filter sees past the segment's edges only there
    np.testing.assert_allclose(audio.numpy()[inner], reference[inner], atol=2e-3)


@pytest.mark.parametrize(
    "extension,kind,subtype,atol",
    [
        ("wav", "WAV", "PCM_16", 0.0),
        ("flac", "FLAC", "PCM_16", 0.0),
        ("ogg", "OGG", "VORBIS", 2e-3),
        ("ogg", "OGG", "OPUS", 2e-3),
        ("mp3", "MP3", "MPEG_LAYER_III", 2e-3),
    ],
)
def test_a_segment_is_the_slice_of_the_whole_file_in_every_format(tmp_path, extension, kind, subtype, atol):
    rate = 48000
    path = tmp_path / f"long.{extension}"
    sf.write(str(path), _signal(rate, 8.0).astype("float32"), rate, format=kind, subtype=subtype)
    whole = load_audio(path, rate)
    offset, duration = 5.5, 1.25
    segment = load_audio(path, rate, offset, duration)
    start = round(offset * rate)
    assert segment.shape == (round(duration * rate),)
    np.testing.assert_allclose(segment.numpy(), whole[start : start + segment.numel()].numpy(), atol=atol)


def test_a_manifest_entry_reads_its_segment_or_its_whole_file(tmp_path):
    path = tmp_path / "a.flac"
    sf.write(str(path), _signal(16000, 3.0).astype("float32"), 16000, subtype="PCM_24")
    whole = ManifestEntry("a", str(path), 3.0, "A").load_audio(16000)
    part = ManifestEntry("a", str(path), 1.0, "A", offset=0.5).load_audio(16000)
    assert whole.shape == (48000,) and torch.equal(part, whole[8000:24000])
    with pytest.raises(ValueError, match=r"a.flac: empty audio at offset 4.0 s"):
        load_audio(path, 16000, 4.0, 1.0)
