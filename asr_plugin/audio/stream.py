"""Long audio read piece by piece: soundfile blocks, averaged to mono and resampled with libsoxr's streaming
resampler, whose state carries across blocks, so the pieces joined are exactly the whole file resampled at once
(`load_audio`'s resampling, the one training used). Memory stays that of one block, whatever the file's length:
a 6-hour 48 kHz stereo file would be 7.7 GiB of float32 decoded whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import soundfile as sf
import soxr

from asr_plugin.audio.reading import describe_error, file_kind_problem, mix_down

BLOCK_SECONDS = 10.0  # of the file, decoded at a time


def audio_seconds(path: str | os.PathLike) -> float:
    """The length of an audio file from its header; ValueError naming the file when it is no regular file or no
    audio (a named pipe or device is never opened)."""
    problem = file_kind_problem(path)
    if problem is not None:
        raise ValueError(f"{path}: {problem}")
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError) as err:
        raise ValueError(f"{path}: unreadable audio ({describe_error(err)})") from None
    return info.frames / info.samplerate


def audio_blocks(
    path: str | os.PathLike, sample_rate: int, block_seconds: float = BLOCK_SECONDS
) -> Iterator[np.ndarray]:
    """(N_i,) float32 mono blocks of the file at `sample_rate`, in order; joined, they are the whole file read,
    averaged and resampled at once. ValueError naming the file when it is no regular file, cannot be decoded, is
    empty, or holds NaN or infinite samples (said with the time of the first block that has them)."""
    audio_seconds(path)  # refuses what is no audio file before opening it for reading
    try:
        with sf.SoundFile(str(path)) as audio:
            rate = audio.samplerate
            resampler = None if rate == sample_rate else soxr.ResampleStream(rate, sample_rate, 1, "float32", "HQ")
            read = 0
            for block in audio.blocks(max(1, round(block_seconds * rate)), dtype="float32", always_2d=True):
                finite = np.isfinite(block)
                if not finite.all():
                    first = read + int(np.argmin(finite.all(axis=1)))
                    raise ValueError(
                        f"{path}: NaN or infinite samples at {first / rate:.3f} s; refused, as a transcript of such "
                        "audio would be silently wrong"
                    )
                read += block.shape[0]
                mono = mix_down(block)
                yield mono if resampler is None else resampler.resample_chunk(mono)
            if read == 0:
                raise ValueError(f"{path}: empty audio")
            if resampler is not None:
                yield resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
    except (RuntimeError, OSError) as err:
        raise ValueError(f"{path}: unreadable audio ({describe_error(err)})") from None
