"""Audio I/O through soundfile (torchaudio >= 2.9 needs torchcodec for loading, which we avoid)."""

from __future__ import annotations

import os

import soundfile as sf
import torch

SAMPLE_RATE = 16000


def load_audio(path: str | os.PathLike, expected_sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """Reads a mono file as a (N,) float32 tensor in [-1, 1]; multi-channel audio is averaged.

    Raises ValueError naming the file when its sample rate is not `expected_sample_rate` or it is empty.
    """
    samples, sample_rate = sf.read(str(path), dtype="float32", always_2d=True)  # (N, C)
    if sample_rate != expected_sample_rate:
        raise ValueError(f"{path}: sample rate {sample_rate} Hz, expected {expected_sample_rate} Hz")
    if samples.shape[0] == 0:
        raise ValueError(f"{path}: empty audio")
    return torch.from_numpy(samples.mean(axis=1))


def probe_audio(path: str | os.PathLike, expected_sample_rate: int = SAMPLE_RATE,
                full_check: bool = False) -> tuple[float | None, str | None]:
    """Checks one file without raising: returns (duration_seconds, None) or (None, reason).

    By default only the header is read (fast on 1000 h); `full_check` decodes every sample too,
    which also finds files truncated after a valid header.
    """
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError) as err:  # soundfile raises LibsndfileError (a RuntimeError)
        return None, f"unreadable audio ({err})"
    if info.samplerate != expected_sample_rate:
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
