"""Manifest creation for LibriSpeech-layout corpora: scan, check every audio file in parallel, write the
split's manifest and, when files were left out, its skip list (paths from `CorpusLayout`)."""

from __future__ import annotations

import functools
import multiprocessing
from pathlib import Path

from tqdm import tqdm

from asr_plugin.data.atomic import write_text_atomic
from asr_plugin.data.audio import SAMPLE_RATE, probe_audio
from asr_plugin.data.layout import CorpusLayout
from asr_plugin.data.librispeech import Candidate, Skipped, scan_split
from asr_plugin.data.manifest import ManifestEntry, write_manifest


def _probe(candidate: Candidate, sample_rate: int, full_check: bool) -> tuple[float | None, str | None]:
    return probe_audio(candidate.path, sample_rate, full_check)


def check_candidates(candidates: list[Candidate], num_workers: int = 1, sample_rate: int = SAMPLE_RATE,
                     full_check: bool = False, desc: str = "checking audio",
                     progress: bool = True) -> tuple[list[ManifestEntry], list[Skipped]]:
    """Reads every candidate's audio header (in `num_workers` processes) and splits them into manifest
    entries and skipped files, keeping the input order."""
    probe = functools.partial(_probe, sample_rate=sample_rate, full_check=full_check)
    bar = dict(total=len(candidates), desc=desc, unit="utt", disable=not progress)
    if num_workers > 1 and len(candidates) > 1:
        with multiprocessing.Pool(num_workers) as pool:
            results = list(tqdm(pool.imap(probe, candidates, chunksize=64), **bar))
    else:
        results = list(tqdm(map(probe, candidates), **bar))
    entries, skipped = [], []
    for candidate, (duration, reason) in zip(candidates, results):
        if reason is None:
            entries.append(ManifestEntry(candidate.id, candidate.path, round(duration, 4), candidate.text))
        else:
            skipped.append(Skipped(candidate.path, reason))
    return entries, skipped


def _skip_lines(skipped: list[Skipped]) -> str:
    return "".join(f"{item.path}\t{item.reason}\n" for item in skipped)


def prepare_split(layout: CorpusLayout, split: str, *, num_workers: int = 1, strict: bool = False,
                  overwrite: bool = False, full_check: bool = False, sample_rate: int = SAMPLE_RATE,
                  progress: bool = True) -> Path:
    """Writes the manifest of `layout.root / split` to `layout.manifest(split)` and returns its path.

    An existing manifest is reused (and nothing is scanned) unless `overwrite`. Files that cannot be used
    (no transcript line, unreadable or empty audio, wrong sample rate) are printed and listed in
    `layout.skip_list(split)`; with `strict` they raise ValueError instead and nothing is written.
    The corpus is only read.
    """
    out = layout.manifest(split)
    if out.exists() and not overwrite:
        print(f"{split}: reusing existing manifest {out} (pass --overwrite to rebuild)")
        return out
    candidates, skipped = scan_split(layout.root, split)
    entries, bad_audio = check_candidates(candidates, num_workers, sample_rate, full_check, split, progress)
    skipped += bad_audio
    if skipped and strict:
        raise ValueError(f"{split}: {len(skipped)} file(s) cannot be used (strict mode; fix them or run "
                         f"without --strict):\n{_skip_lines(skipped)}")
    if not entries:
        raise ValueError(f"{split}: no usable utterance under {layout.root / split}")
    skips = layout.skip_list(split)
    if skipped:
        write_text_atomic(skips, _skip_lines(skipped))
        print(f"{split}: {len(skipped)} file(s) left out, listed in {skips}:\n{_skip_lines(skipped)}", end="")
    elif skips.exists() and overwrite:
        skips.unlink()
    write_manifest(entries, out, overwrite=overwrite)
    hours = sum(e.duration for e in entries) / 3600
    print(f"{split}: wrote {len(entries)} utterances ({hours:.2f} h) to {out}")
    return out
