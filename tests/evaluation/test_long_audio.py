"""Long files are read piece by piece (`asr_plugin.audio.stream`) and cut as they arrive
(`asr_plugin.evaluation.chunking.stream_chunks`): the pieces are the whole file resampled at once, cut where the
whole file would be cut, memory does not grow with the file's length, and NaN or infinite samples are refused
naming the file."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from asr_plugin.audio import load_audio
from asr_plugin.audio.stream import audio_blocks
from asr_plugin.evaluation.chunking import chunk_bounds, stream_chunks


def write_speech_like(path: Path, seconds: float, rate: int = 48_000, channels: int = 2) -> Path:
    """Bursts of tones (0.7 s) between pauses (0.3 s), stereo, written block by block (never held whole)."""
    rng = np.random.default_rng(0)
    with sf.SoundFile(str(path), "w", rate, channels, subtype="PCM_16") as out:
        for start in range(0, int(seconds * rate), rate):
            t = np.arange(start, min(start + rate, int(seconds * rate))) / rate
            tone = 0.3 * np.sin(2 * np.pi * (200 + 100 * rng.random()) * t) * ((t % 1.0) < 0.7)
            noise = 0.001 * rng.standard_normal((t.size, channels))
            out.write(tone[:, None] + noise)
    return path


def test_the_pieces_are_the_whole_file_resampled_and_cut_where_it_would_be(tmp_path):
    path = write_speech_like(tmp_path / "long.wav", 23.4)
    whole = load_audio(path, 16_000)  # the whole file, averaged and resampled at once (training's loading)
    chunks = list(stream_chunks(audio_blocks(path, 16_000, block_seconds=1.3), 16_000, chunk_seconds=4.0))
    joined = torch.cat(chunks)
    assert joined.shape == whole.shape
    torch.testing.assert_close(joined, whole, atol=1e-6, rtol=0)
    ends = np.cumsum([chunk.shape[0] for chunk in chunks]).tolist()
    assert ends == [end for _, end in chunk_bounds(whole, 16_000, 4.0)]
    assert len(chunks) >= 6 and max(chunk.shape[0] for chunk in chunks) <= 4 * 16_000


def _peak_bytes(path: Path) -> int:
    tracemalloc.start()
    try:
        for _ in stream_chunks(audio_blocks(path, 16_000), 16_000, chunk_seconds=30.0):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_files_length(tmp_path):
    short = write_speech_like(tmp_path / "short.wav", 20.0)
    long = write_speech_like(tmp_path / "long.wav", 200.0)
    whole_long = 200 * 48_000 * 2 * 4  # float32 stereo decoded whole: 77 MB
    peak_short, peak_long = _peak_bytes(short), _peak_bytes(long)
    assert peak_long < 1.25 * peak_short + 2**20, (peak_short, peak_long)
    assert peak_long < whole_long / 3, (peak_long, whole_long)


def test_nan_or_infinite_samples_are_refused_naming_the_file_and_the_time(tmp_path):
    samples = np.full((48_000 * 3, 2), 0.1, dtype=np.float32)
    samples[48_000 * 2 + 480, 1] = np.inf
    path = tmp_path / "broken.wav"
    sf.write(str(path), samples, 48_000, subtype="FLOAT")
    with pytest.raises(ValueError, match=r"broken\.wav: NaN or infinite samples at 2\.010 s"):
        list(audio_blocks(path, 16_000, block_seconds=1.0))
    (tmp_path / "empty.wav").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.wav: unreadable audio"):
        list(audio_blocks(tmp_path / "empty.wav", 16_000))
