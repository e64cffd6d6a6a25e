"""Runs the text-to-speech engines of the mini corpus: lists of requests, each list in a fresh process, several
processes at once, and the audio brought to one sample rate.

Both engines carry state from one utterance to the next (espeak-ng's pitch flutter, onnxruntime's noise
generators), so each list is synthesised in a process of its own (``maxtasksperchild=1``): its audio then
depends only on the list and its seed, whichever worker ran it and whatever ran before.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torchaudio

from asr_plugin.data.demo.tts_espeak import synthesize_espeak
from asr_plugin.data.demo.tts_piper import synthesize_piper
from asr_plugin.data.preparation.child_processes import die_with_parent

# engine name -> (requests, seed) -> [((N_i,) float32 audio, its sample rate)]
ENGINES: dict[str, Callable[[list[Any], int], list[tuple[np.ndarray, int]]]] = {
    "espeak": synthesize_espeak,
    "piper": synthesize_piper,
}


def _run(task: tuple[str, list[Any], int]) -> list[tuple[np.ndarray, int]]:
    engine, requests, seed = task
    return ENGINES[engine](requests, seed)


def default_workers() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def synthesize_lists(
    tasks: Sequence[tuple[str, list[Any], int]],
    workers: int | None = None,
) -> Iterator[list[tuple[np.ndarray, int]]]:
    """For each (engine, requests, seed) task, in order: [((N_i,) float32 audio, sample rate)], each task in a
    fresh process, up to `workers` (default: every CPU) at once; the processes die with this one."""
    for engine, _, _ in tasks:
        if engine not in ENGINES:
            raise ValueError(f"engine: no text-to-speech engine {engine!r} (known: {sorted(ENGINES)})")
    if not tasks:
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    processes = max(1, min(len(tasks), workers or default_workers()))
    with context.Pool(processes, initializer=die_with_parent, initargs=(os.getpid(),), maxtasksperchild=1) as pool:
        yield from pool.imap(_run, tasks)


def to_sample_rate(audio: list[tuple[np.ndarray, int]], sample_rate: int) -> list[np.ndarray]:
    """[(N_i,) float32 at `sample_rate`] of [(audio, its rate)]. One resampling call per source rate over the
    zero-padded group is far faster than one per utterance; the padding only meets each signal where the
    resampler pads with zeros anyway."""
    groups: dict[int, list[int]] = defaultdict(list)
    for index, (_, rate) in enumerate(audio):
        groups[rate].append(index)
    result: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(audio)
    for rate, indices in groups.items():
        waves = [torch.from_numpy(np.ascontiguousarray(audio[i][0], dtype=np.float32)) for i in indices]
        with torch.no_grad():
            padded = torch.nn.utils.rnn.pad_sequence(waves, batch_first=True)  # (N, S)
            resampled = padded if rate == sample_rate else torchaudio.functional.resample(padded, rate, sample_rate)
        for i, wave, row in zip(indices, waves, resampled):
            result[i] = row[: -(-wave.numel() * sample_rate // rate)].numpy()
    return result
