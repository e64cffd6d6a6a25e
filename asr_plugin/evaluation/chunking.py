"""Long audio in pieces the model can take: cut points at the quietest moment near each chunk's end.

A Conformer's self-attention costs T^2 in time and memory: an hour of audio is 90k encoder frames at 40 ms,
8e9 attention scores per head and layer, where the models were trained on utterances of at most ~35 s. So
``transcribe.py`` decodes a long file as consecutive chunks of at most `chunk_seconds`, each cut where the
10 ms frame energy is lowest within the chunk's last `search_seconds` (a pause between words, in speech), and
joins their texts. A word spoken across a cut without a pause may still be split or lost there.
"""

from __future__ import annotations

import torch

FRAME_SECONDS = 0.01  # energy frames for finding a quiet cut


def chunk_bounds(
    waveform: torch.Tensor, sample_rate: int, chunk_seconds: float, search_seconds: float = 2.0
) -> list[tuple[int, int]]:
    """[(start, end)] sample ranges covering the (N,) `waveform` in order, each at most `chunk_seconds` long.

    Every cut but the last lies in the final `search_seconds` of its chunk (capped at half the chunk), at the
    start of the 10 ms frame of least energy there; audio no longer than one chunk is a single range.
    """
    if chunk_seconds <= 0:
        raise ValueError(f"chunk_seconds={chunk_seconds} must be positive")
    total = int(waveform.shape[0])
    longest = max(1, int(chunk_seconds * sample_rate))
    frame = max(1, int(FRAME_SECONDS * sample_rate))
    search = max(frame, min(int(search_seconds * sample_rate), longest // 2))
    bounds, start = [], 0
    while total - start > longest:
        window = waveform[start + longest - search : start + longest]
        frames = window[: window.shape[0] // frame * frame].reshape(-1, frame)  # (n, frame)
        quietest = int(frames.double().pow(2).sum(dim=1).argmin())
        end = start + longest - search + quietest * frame
        bounds.append((start, end))
        start = end
    bounds.append((start, total))
    return bounds
