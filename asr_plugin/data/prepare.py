"""Manifest creation for LibriSpeech-layout corpora: scan, check every audio file in parallel, write
`<manifest_dir>/<split>.jsonl` and, when files were left out, `<split>.skipped.tsv` next to it."""

from __future__ import annotations

import functools
import multiprocessing
import os
from pathlib import Path

from tqdm import tqdm

from asr_plugin.data.atomic import write_text_atomic
from asr_plugin.data.audio import SAMPLE_RATE, probe_audio
from asr_plugin.data.librispeech import Candidate, Skipped, scan_split
from asr_plugin.data.manifest import ManifestEntry, write_manifest


def manifest_path(manifest_dir: str | os.PathLike, split: str) -> Path:
    """Where the manifest of `split` lives."""
    return Path(manifest_dir) / f"{split}.jsonl"


def skip_list_path(manifest_dir: str | os.PathLike, split: str) -> Path:
    """Where the files left out of `split`'s manifest are listed (path<TAB>reason)."""
    return Path(manifest_dir) / f"{split}.skipped.tsv"


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


def prepare_split(root: str | os.PathLike, split: str, manifest_dir: str | os.PathLike, *,
                  num_workers: int = 1, strict: bool = False, overwrite: bool = False,
                  full_check: bool = False, sample_rate: int = SAMPLE_RATE, progress: bool = True) -> Path:
    """Writes the manifest of ROOT/split and returns its path.

    An existing manifest is reused (and nothing is scanned) unless `overwrite`. Files that cannot be used
    (no transcript line, unreadable or empty audio, wrong sample rate) are printed and listed in
    `<split>.skipped.tsv`; with `strict` they raise ValueError instead and nothing is written.
    The source tree is only read.
    """
    out = manifest_path(manifest_dir, split)
    if out.exists() and not overwrite:
        print(f"{split}: reusing existing manifest {out} (pass --overwrite to rebuild)")
        return out
    candidates, skipped = scan_split(root, split)
    entries, bad_audio = check_candidates(candidates, num_workers, sample_rate, full_check, split, progress)
    skipped += bad_audio
    if skipped and strict:
        raise ValueError(f"{split}: {len(skipped)} file(s) cannot be used (strict mode; fix them or run "
                         f"without --strict):\n{_skip_lines(skipped)}")
    if not entries:
        raise ValueError(f"{split}: no usable utterance under {Path(root) / split}")
    skips = skip_list_path(manifest_dir, split)
    if skipped:
        write_text_atomic(skips, _skip_lines(skipped))
        print(f"{split}: {len(skipped)} file(s) left out, listed in {skips}:\n{_skip_lines(skipped)}", end="")
    elif skips.exists() and overwrite:
        skips.unlink()
    write_manifest(entries, out, overwrite=overwrite)
    hours = sum(e.duration for e in entries) / 3600
    print(f"{split}: wrote {len(entries)} utterances ({hours:.2f} h) to {out}")
    return out


def prepare_librispeech(root: str | os.PathLike, manifest_dir: str | os.PathLike, splits: list[str], *,
                        num_workers: int = 1, strict: bool = False, overwrite: bool = False,
                        full_check: bool = False, progress: bool = True) -> dict[str, Path]:
    """Runs `prepare_split` for each split; returns {split: manifest path}."""
    return {
        split: prepare_split(root, split, manifest_dir, num_workers=num_workers, strict=strict,
                             overwrite=overwrite, full_check=full_check, progress=progress)
        for split in splits
    }
