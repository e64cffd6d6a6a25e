"""Manifest creation for any data source: scan the split (`DataSource.scan`), check every utterance's audio
in parallel, write the split's manifest and, when anything was left out, its skip list (paths from
`CorpusLayout`)."""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from asr_plugin.audio.reading import probe_audio, segment_content_problem
from asr_plugin.data.preparation.child_processes import die_with_parent
from asr_plugin.data.preparation.layout import CorpusLayout
from asr_plugin.data.sources import DataSource, LibriSpeechSource
from asr_plugin.data.sources.candidate import Candidate, Skipped
from asr_plugin.data.sources.manifest import ManifestEntry, write_manifest
from asr_plugin.files import write_text_atomic
from asr_plugin.line_fields import line_field
from asr_plugin.progress import track

# How far a stated segment may run past the end of its audio: mp3 and opus headers give lengths to a frame
# or two (~50 ms), manifests round durations to 10 ms.
DURATION_TOLERANCE_S = 0.1
SHOWN_SKIPPED = 20  # left-out items printed by name; the rest are counted (the skip list has them all)
# A transcript longer than this many characters per second of its audio (plus TEXT_SLACK_CHARACTERS) is not the
# speech of that audio: fast read speech is 15-20 characters a second, and a model emits at most a few tokens per
# encoder frame (a 10 MB transcript would ask the loss for tens of GB).
MAX_CHARACTERS_PER_SECOND = 40
TEXT_SLACK_CHARACTERS = 20
# Unicode's bidirectional embeddings, overrides, isolates and marks (format characters that reorder displayed text).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def segment_problem(candidate: Candidate, file_seconds: float) -> str | None:
    """Why the candidate's stated segment does not fit its audio of `file_seconds`, or None."""
    for name, value in (("offset", candidate.offset), ("duration", candidate.duration)):
        if value is not None and not math.isfinite(value):
            return f"{name} {value} is not a finite number of seconds"
    offset = candidate.offset or 0.0
    if candidate.duration is None:
        return None
    if offset >= file_seconds:
        return f"offset {offset:g} s is past the end of the audio ({file_seconds:.3f} s)"
    if offset + candidate.duration > file_seconds + DURATION_TOLERANCE_S:
        return (
            f"duration {candidate.duration:g} s from offset {offset:g} s runs past the end of the audio "
            f"({file_seconds:.3f} s): the manifest's duration disagrees with the file"
        )
    return None


def text_problem(text: str, seconds: float) -> str | None:
    """Why a transcript cannot be the speech of `seconds` of audio (far too long for it, or holding a control
    character: NUL, BEL, a bidirectional override such as U+202E, which no speech says), or None."""
    control = next((c for c in text if unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS), None)
    if control is not None:
        return (
            f"transcript holds the control character U+{ord(control):04X} "
            f"({unicodedata.name(control, 'a C0/C1 control')}) at character {text.index(control)}"
        )
    limit = MAX_CHARACTERS_PER_SECOND * seconds + TEXT_SLACK_CHARACTERS
    if len(text) > limit:
        return (
            f"transcript of {len(text)} characters for {seconds:.3f} s of audio (more than "
            f"{MAX_CHARACTERS_PER_SECOND} a second: no speech is that fast, the text or the segment is wrong)"
        )
    return None


def _probe(candidate: Candidate, full_check: bool) -> tuple[float | None, str | None]:
    """(seconds the utterance lasts, None) or (None, why it cannot be used)."""
    seconds, problem = probe_audio(candidate.path, None, full_check)
    if problem is None:
        problem = segment_problem(candidate, seconds)
    if problem is not None:
        return None, problem
    if candidate.duration is not None:  # within the tolerance: what the file holds
        seconds = min(candidate.duration, seconds - (candidate.offset or 0.0))
    problem = text_problem(candidate.text, seconds) or segment_content_problem(
        candidate.path, candidate.offset, None if candidate.offset is None else seconds
    )
    return (None, problem) if problem is not None else (seconds, None)


def check_candidates(
    candidates: list[Candidate],
    num_workers: int = 1,
    full_check: bool = False,
    desc: str = "checking audio",
    progress: bool = True,
) -> tuple[list[ManifestEntry], list[Skipped]]:
    """Reads every candidate's audio header (in `num_workers` processes), checks its segment against the
    file's length and splits the candidates into manifest entries and skipped ones, keeping the input order.
    Any sample rate and channel count is accepted: loading resamples and averages."""
    probe = functools.partial(_probe, full_check=full_check)
    shown = dict(total=len(candidates), desc=desc, enabled=progress)
    if num_workers > 1 and len(candidates) > 1:
        # forkserver, not fork: a process that already ran torch's or a decoder's threads can deadlock or kill a
        # forked child, and a dead worker hangs multiprocessing.Pool; the executor raises BrokenProcessPool
        context = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(
            num_workers, mp_context=context, initializer=die_with_parent, initargs=(os.getpid(),)
        ) as pool:
            results = list(track(pool.map(probe, candidates, chunksize=64), **shown))
    else:
        results = list(track(map(probe, candidates), **shown))
    entries, skipped = [], []
    for candidate, (duration, reason) in zip(candidates, results):
        if reason is None:
            # a segment's duration decides what is read: kept as stated (rounding it would move its end)
            duration = round(duration, 4) if candidate.offset is None else duration
            entries.append(
                ManifestEntry(
                    candidate.id, candidate.path, duration, candidate.text, candidate.offset, candidate.speaker
                )
            )
        else:
            where = f"{candidate.where} ({candidate.path})" if candidate.where else candidate.path
            skipped.append(Skipped(where, reason))
    return entries, skipped


def _skip_lines(skipped: list[Skipped], limit: int | None = None) -> str:
    shown = "".join(f"{line_field(item.path)}\t{line_field(item.reason)}\n" for item in skipped[:limit])
    more = len(skipped) - len(skipped[:limit])
    return shown + (f"... and {more} more\n" if more else "")


def prepare_split(
    layout: CorpusLayout,
    split: str,
    *,
    source: DataSource | None = None,
    num_workers: int = 1,
    strict: bool = False,
    overwrite: bool = False,
    full_check: bool = False,
    progress: bool = True,
) -> Path:
    """Writes the manifest of `split` of `source` (None: the LibriSpeech layout under `layout.root`) to
    `layout.manifest(split)` and returns its path.

    An existing manifest is reused (and nothing is scanned) unless `overwrite`. What cannot be used (no
    transcript, a bad manifest line, a missing, unreadable or empty audio file, a segment past the end of
    its file) is printed (the first 20 and the count) and listed in `layout.skip_list(split)` with where it
    was (file, or manifest:line) and why; with `strict` it raises ValueError instead and nothing is written.
    The corpus and the source's manifests are only read.
    """
    source = source or LibriSpeechSource(layout.root)
    out = layout.manifest(split)
    if out.exists() and not overwrite:
        print(f"{split}: reusing existing manifest {out} (pass --overwrite to rebuild)")
        return out
    candidates, skipped = source.scan(split)
    entries, bad_audio = check_candidates(candidates, num_workers, full_check, f"{split}: checking audio", progress)
    skipped += bad_audio
    if skipped and strict:
        raise ValueError(
            f"{split}: {len(skipped)} utterance(s) or file(s) cannot be used (strict mode; fix them "
            f"or run without --strict):\n{_skip_lines(skipped, SHOWN_SKIPPED)}"
        )
    if not entries:
        raise ValueError(
            f"{split}: no usable utterance in {source!r}"
            + (f"; {len(skipped)} left out:\n{_skip_lines(skipped, SHOWN_SKIPPED)}" if skipped else "")
        )
    skips = layout.skip_list(split)
    if skipped:
        write_text_atomic(skips, _skip_lines(skipped))
        print(
            f"{split}: {len(skipped)} utterance(s) or file(s) left out, listed in {skips}:\n"
            f"{_skip_lines(skipped, SHOWN_SKIPPED)}",
            end="",
        )
    elif skips.exists() and overwrite:
        skips.unlink()
    write_manifest(entries, out, overwrite=overwrite)
    hours = sum(e.duration for e in entries) / 3600
    print(f"{split}: wrote {len(entries)} utterances ({hours:.2f} h) to {out}")
    return out
