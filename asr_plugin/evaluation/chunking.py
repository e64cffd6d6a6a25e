"""Long audio in pieces the model can take: cut points at the quietest moment near each chunk's end.

A Conformer's self-attention costs T^2 in time and memory: an hour of audio is 90k encoder frames at 40 ms,
8e9 attention scores per head and layer, where the models were trained on utterances of at most ~35 s. So
``transcribe.py`` decodes a long file as consecutive chunks of at most `chunk_seconds`, each cut where the
10 ms frame energy is lowest within the chunk's last `search_seconds` (a pause between words, in speech), and
joins their texts. A word spoken across a cut without a pause may still be split or lost there.

`stream_chunks` cuts audio that arrives in blocks (`asr_plugin.audio.stream`) at the same points as
`chunk_bounds` cuts the whole of it, holding at most a chunk and a block.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import torch

FRAME_SECONDS = 0.01  # energy frames for finding a quiet cut


def _sizes(sample_rate: int, chunk_seconds: float, search_seconds: float) -> tuple[int, int, int]:
    """(longest chunk, energy frame, search window) in samples."""
    if chunk_seconds <= 0:
        raise ValueError(f"chunk_seconds={chunk_seconds} must be positive")
    longest = max(1, int(chunk_seconds * sample_rate))
    frame = max(1, int(FRAME_SECONDS * sample_rate))
    search = max(frame, min(int(search_seconds * sample_rate), longest // 2))
    return longest, frame, search


def _cut(chunk: torch.Tensor, longest: int, frame: int, search: int) -> int:
    """Where to end a chunk that starts at `chunk[0]` and is longer than `longest` samples: the start of the
    quietest `frame` in its last `search` samples before `longest`."""
    window = chunk[longest - search : longest]
    frames = window[: window.shape[0] // frame * frame].reshape(-1, frame)  # (n, frame)
    return longest - search + int(frames.double().pow(2).sum(dim=1).argmin()) * frame


def chunk_bounds(
    waveform: torch.Tensor, sample_rate: int, chunk_seconds: float, search_seconds: float = 2.0
) -> list[tuple[int, int]]:
    """[(start, end)] sample ranges covering the (N,) `waveform` in order, each at most `chunk_seconds` long.

    Every cut but the last lies in the final `search_seconds` of its chunk (capped at half the chunk), at the
    start of the 10 ms frame of least energy there; audio no longer than one chunk is a single range.
    """
    longest, frame, search = _sizes(sample_rate, chunk_seconds, search_seconds)
    total = int(waveform.shape[0])
    bounds, start = [], 0
    while total - start > longest:
        end = start + _cut(waveform[start:], longest, frame, search)
        bounds.append((start, end))
        start = end
    bounds.append((start, total))
    return bounds


def stream_chunks(
    blocks: Iterable[np.ndarray], sample_rate: int, chunk_seconds: float, search_seconds: float = 2.0
) -> Iterator[torch.Tensor]:
    """The (N_i,) chunks of audio arriving as (M_j,) `blocks`, in order: cut where `chunk_bounds` cuts the
    blocks joined, while holding only the audio not yet handed out (less than a chunk) and one block."""
    longest, frame, search = _sizes(sample_rate, chunk_seconds, search_seconds)
    pending = torch.zeros(0)
    for block in blocks:
        pending = torch.cat((pending, torch.from_numpy(np.ascontiguousarray(block, dtype=np.float32))))
        while pending.shape[0] > longest:
            end = _cut(pending, longest, frame, search)
            yield pending[:end].clone()  # a copy: `pending` is let go of
            pending = pending[end:]
    if pending.shape[0]:
        yield pending
