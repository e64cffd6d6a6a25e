"""Audio I/O through soundfile (torchaudio >= 2.9 needs torchcodec for loading, which we avoid).

Audio comes as it is recorded: any sample rate (resampled to the front end's on the fly, once per
utterance, with libsoxr's high-quality resampler: 5x faster than torchaudio's on 48 kHz input, see
docs/data.md, "Your own data"), any channel count (averaged to mono), any format
libsndfile reads (wav, flac, ogg/vorbis, opus, mp3 with libsndfile >= 1.1), and segments of long files,
read without decoding the rest (``soundfile.read(start=, frames=)`` seeks).
"""

from __future__ import annotations

import os

import numpy as np
import soundfile as sf
import soxr
import torch

SAMPLE_RATE = 16000
# Seconds decoded before a segment's start and dropped, per format: after a seek libsndfile's mp3 decoder
# gives ~80 ms of wrong samples (its bit reservoir and overlap need the frames before); measured exact after
# 0.25 s (tests/data/test_audio_as_it_comes.py). wav, flac and ogg seek exactly.
SEEK_PRE_ROLL_S = {"MP3": 0.25}


def load_audio(
    path: str | os.PathLike, sample_rate: int = SAMPLE_RATE, offset: float | None = None, duration: float | None = None
) -> torch.Tensor:
    """Reads a file, or its segment, as a (N,) float32 tensor in [-1, 1] at `sample_rate`.

    Args:
        path: the audio file.
        sample_rate: of the result; a file at another rate is resampled.
        offset: start of the segment in seconds; None (or 0) = from the start.
        duration: seconds of the segment; None = to the end of the file.

    Multi-channel audio is averaged. Raises ValueError naming the file when the segment holds no sample.
    """
    with sf.SoundFile(str(path)) as audio:
        file_rate = audio.samplerate
        start = min(round((offset or 0.0) * file_rate), audio.frames)
        pre_roll = min(start, round(SEEK_PRE_ROLL_S.get(audio.format, 0.0) * file_rate))
        frames = -1 if duration is None else round(duration * file_rate) + pre_roll
        if start:
            audio.seek(start - pre_roll)
        samples = audio.read(frames, dtype="float32", always_2d=True)[pre_roll:]  # (N, C)
    if samples.shape[0] == 0:
        where = f" at offset {offset} s" if offset else ""
        raise ValueError(f"{path}: empty audio{where}")
    return to_mono_at_rate(samples, file_rate, sample_rate)


def to_mono_at_rate(samples: np.ndarray, file_rate: int, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """(N, C) samples at `file_rate` -> (N,) float32 tensor at `sample_rate`: channels averaged, then
    resampled with libsoxr (every source's audio goes through here, Shar's decoded by lhotse included)."""
    # Averaged first, so that resampling runs once. A sum of columns, not `samples.mean(axis=1)`: numpy reduces
    # a short last axis row by row, 24 ms for 30 s of 48 kHz stereo against 1.6 ms here (the same floats;
    # `python scripts/benchmark_data.py audio` measures both).
    mono = mix_down(samples)
    if file_rate != sample_rate:
        mono = soxr.resample(mono, file_rate, sample_rate, quality="HQ")
    return torch.from_numpy(mono)


def probe_audio(
    path: str | os.PathLike, expected_sample_rate: int | None = None, full_check: bool = False
) -> tuple[float | None, str | None]:
    """Checks one file without raising: returns (duration_seconds, None) or (None, reason).

    By default only the header is read (fast on 1000 h); `full_check` decodes every sample too,
    which also finds files truncated after a valid header. `expected_sample_rate` None accepts any rate
    (loading resamples); a number refuses the others.
    """
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError) as err:  # soundfile raises LibsndfileError (a RuntimeError)
        return None, f"unreadable audio ({err})"
    if expected_sample_rate is not None and info.samplerate != expected_sample_rate:
        return None, f"sample rate {info.samplerate} Hz, expected {expected_sample_rate} Hz"
    if info.frames <= 0:
        return None, "empty audio"
    if full_check:
        try:
            num_samples = sf.read(str(path), dtype="int16", always_2d=True)[0].shape[0]
        except (RuntimeError, OSError) as err:
            return None, f"unreadable audio ({err})"
        if num_samples == 0:
            return None, "empty audio"
        return num_samples / info.samplerate, None
    return info.frames / info.samplerate, None


def mix_down(samples: np.ndarray) -> np.ndarray:
    """(N, C) -> (N,) float32, contiguous: the channels' average (column by column: see `to_mono_at_rate`)."""
    channels = samples.shape[1]
    mono = np.array(samples[:, 0], dtype=np.float32)  # a contiguous copy, summed into
    for channel in range(1, channels):
        mono += samples[:, channel]
    if channels > 1:
        mono *= np.float32(1.0 / channels)
    return mono
