"""Audio I/O through soundfile (torchaudio >= 2.9 needs torchcodec for loading, which we avoid).

Audio comes as it is recorded: any sample rate (resampled to the front end's on the fly, once per
utterance, with libsoxr's high-quality resampler: 5x faster than torchaudio's on 48 kHz input, see
docs/data.md, "Your own data"), any channel count (averaged to mono), any format
libsndfile reads (wav, flac, ogg/vorbis, opus, mp3 with libsndfile >= 1.1), and segments of long files,
read without decoding the rest (``soundfile.read(start=, frames=)`` seeks).
"""

from __future__ import annotations

import os
import stat

import numpy as np
import soundfile as sf
import soxr
import torch

SAMPLE_RATE = 16000
# Seconds decoded before a segment's start and dropped, per format: after a seek libsndfile's mp3 decoder
# gives ~80 ms of wrong samples (its bit reservoir and overlap need the frames before); measured exact after
# 0.25 s (tests/audio/test_audio_as_it_comes.py). wav, flac and ogg seek exactly.
SEEK_PRE_ROLL_S = {"MP3": 0.25}
# Sample formats that can hold NaN or infinity (integer PCM and the lossy codecs' decoders cannot).
FLOAT_SUBTYPES = ("FLOAT", "DOUBLE")
# The end of a segment read back at preparation: a file cut short after a valid header fails there.
TAIL_CHECK_S = 0.1
BLOCK_FRAMES = 1 << 16  # frames decoded at a time when a whole segment is scanned


def stat_regular_file(path: str | os.PathLike) -> tuple[os.stat_result | None, str | None]:
    """(its `os.stat`, None) for a regular file, else (None, why `path` is no file to read audio from). Only
    `os.stat`: a named pipe, a device or a socket is never opened (opening a FIFO waits for a writer; /dev/zero
    never ends)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as err:
        return None, f"cannot be read ({err.strerror})"
    return (status, None) if stat.S_ISREG(status.st_mode) else (None, _kind_of(status.st_mode))


def file_kind_problem(path: str | os.PathLike) -> str | None:
    """Why `path` is no regular file to read audio from, or None (`stat_regular_file`)."""
    return stat_regular_file(path)[1]


def _kind_of(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a named pipe (FIFO)",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    kind = next((name for test, name in kinds.items() if test(mode)), "a special file")
    return f"{kind}, not an audio file (not opened)"


def _regular_file(path: str | os.PathLike) -> None:
    problem = file_kind_problem(path)
    if problem is not None:
        raise ValueError(f"{path}: {problem}")


def _nonfinite_problem(samples: np.ndarray) -> str | None:
    bad = samples.size - int(np.count_nonzero(np.isfinite(samples)))
    return f"{bad} of {samples.size} samples are NaN or infinite" if bad else None


def load_audio(
    path: str | os.PathLike, sample_rate: int = SAMPLE_RATE, offset: float | None = None, duration: float | None = None
) -> torch.Tensor:
    """Reads a file, or its segment, as a (N,) float32 tensor in [-1, 1] at `sample_rate`.

    Args:
        path: the audio file.
        sample_rate: of the result; a file at another rate is resampled.
        offset: start of the segment in seconds; None (or 0) = from the start.
        duration: seconds of the segment; None = to the end of the file.

    Multi-channel audio is averaged. Raises ValueError naming the file when it is no regular file, cannot be
    decoded, or the segment holds no sample or samples that are NaN or infinite.
    """
    _regular_file(path)
    try:
        with sf.SoundFile(str(path)) as audio:
            file_rate = audio.samplerate
            start = min(round((offset or 0.0) * file_rate), audio.frames)
            pre_roll = min(start, round(SEEK_PRE_ROLL_S.get(audio.format, 0.0) * file_rate))
            frames = -1 if duration is None else round(duration * file_rate) + pre_roll
            if start:
                audio.seek(start - pre_roll)
            samples = audio.read(frames, dtype="float32", always_2d=True)[pre_roll:]  # (N, C)
    except (RuntimeError, OSError) as err:  # LibsndfileError is a RuntimeError
        raise ValueError(f"{path}: cannot decode the audio ({describe_error(err)})") from None
    where = f" at offset {offset} s" if offset else ""
    if samples.shape[0] == 0:
        raise ValueError(f"{path}: empty audio{where}")
    problem = _nonfinite_problem(samples)
    if problem is not None:
        raise ValueError(f"{path}: {problem}{where}")
    return to_mono_at_rate(samples, file_rate, sample_rate)


def describe_error(err: BaseException) -> str:
    """`str(err)`, or its type and arguments when that fails (a LibsndfileError rebuilt in another process has
    lost the code its message comes from: "<exception str() failed>")."""
    try:
        return str(err)
    except Exception:  # noqa: BLE001 - any failure of a foreign __str__
        return f"{type(err).__name__}{err.args!r}"


def segment_content_problem(path: str | os.PathLike, offset: float | None, duration: float | None) -> str | None:
    """Why the samples of a segment (None: the whole file) cannot be trained on, read from the file (its header
    was checked before), or None: the segment's last `TAIL_CHECK_S` seconds cannot be decoded (a file cut short
    after a valid header), or, in a float format, samples are NaN or infinite (the whole segment is scanned)."""
    try:
        with sf.SoundFile(str(path)) as audio:
            rate, total = audio.samplerate, audio.frames
            start = min(round((offset or 0.0) * rate), total)
            end = total if duration is None else min(total, start + round(duration * rate))
            tail = max(start, end - round(TAIL_CHECK_S * rate))
            audio.seek(tail)
            if audio.read(end - tail, dtype="float32", always_2d=True).shape[0] == 0 and end > tail:
                return f"no sample can be read at {tail / rate:.3f} s although the header says {total / rate:.3f} s"
            if audio.subtype not in FLOAT_SUBTYPES:
                return None
            audio.seek(start)
            for position in range(start, end, BLOCK_FRAMES):
                block = audio.read(min(BLOCK_FRAMES, end - position), dtype="float64", always_2d=True)
                problem = _nonfinite_problem(block)
                if problem is not None:
                    return f"{problem} (in the block from {position / rate:.3f} s)"
    except (RuntimeError, OSError) as err:
        return f"the audio cannot be decoded up to its end as the header says: truncated or corrupt ({describe_error(err)})"
    return None


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

    A named pipe, device or socket is refused without being opened (`file_kind_problem`). By default only the
    header is read (fast on 1000 h); `full_check` decodes every sample too, which also finds files truncated
    after a valid header. `expected_sample_rate` None accepts any rate
    (loading resamples); a number refuses the others.
    """
    problem = file_kind_problem(path)
    if problem is not None:
        return None, problem
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError) as err:  # soundfile raises LibsndfileError (a RuntimeError)
        return None, f"unreadable audio ({describe_error(err)})"
    if expected_sample_rate is not None and info.samplerate != expected_sample_rate:
        return None, f"sample rate {info.samplerate} Hz, expected {expected_sample_rate} Hz"
    if info.frames <= 0:
        return None, "empty audio"
    if full_check:
        try:
            num_samples = sf.read(str(path), dtype="int16", always_2d=True)[0].shape[0]
        except (RuntimeError, OSError) as err:
            return None, f"unreadable audio ({describe_error(err)})"
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
