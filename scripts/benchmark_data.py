#!/usr/bin/env python
"""Data-layer speeds that size a LibriSpeech run, printed as tables (docs/data.md quotes them).

    python scripts/benchmark_data.py check [--entries 281241] [--repeats 3] [--drop-caches]
    python scripts/benchmark_data.py loader [--utterances 24] [--min-seconds 8] [--max-seconds 30] [--repeats 3]
        [--vocab-size 500] [--source librispeech|nemo|shar] [--rate 16000] [--channels 1]
    python scripts/benchmark_data.py sampler [--entries 281241] [--replicas 8] [--max-duration 600] [--shar]
        [--workers 2]
    python scripts/benchmark_data.py audio [--seconds 30] [--rate 48000] [--channels 2]

``check``: the start-of-training manifest check on a synthetic manifest of `--entries` files (LibriSpeech
960 h has 281,241) laid out as LibriSpeech's (about 113 files per chapter folder): reading the manifest, the
existence/size check (`audio_problems`) with 1, 4 and 16 threads, and the tokenizer's text normalisation.
The files are 1-byte placeholders in a temporary directory (the check reads no audio). `--drop-caches`
(root) empties the page cache before the first check, as on a node that has not read the corpus yet.

``loader``: audio seconds delivered per CPU second by one loader process (what a DataLoader worker does per
item: read flac, speed-perturb, features, tokenize) on synthetic LibriSpeech-layout utterances of
`--min-seconds`..`--max-seconds` (scripts/make_synthetic_librispeech.py), for the default log-mel front end
and NeMo's, with and without speed perturbation. `--source nemo --rate 48000 --channels 2` reads the same
utterances as segments of long 48 kHz stereo flac recordings through a NeMo manifest (resampling included);
`--source shar` writes those segments (`--rate`, `--channels`) into a Lhotse Shar directory (flac, lhotse's
SharWriter, 4 shards) and streams it as the Shar training loader's workers do (tar read, lhotse's decode,
channel average, libsoxr; no shuffling). `--format wav` writes those recordings (or the Shar's audio) as
16-bit wav instead of flac.

``sampler``: this project's `DurationBatchSampler` against lhotse's `DynamicBucketingSampler` on the same
`--entries` durations (a LibriSpeech-like mix: 75 % 10-17 s, 24 % 1-10 s, 1 % 17-35 s, seeded): one epoch's
batches per second (building included), padding fraction, DDP agreement over `--replicas` ranks (batches per
rank, utterances used once, the spread of the ranks' longest utterance at each step) and resume exactness
(stop half-way, restore a fresh sampler from the state, compare the rest of the epoch). Needs lhotse.
`--shar` also writes the durations as the metadata of a Shar directory (1000 cuts per shard) and plans one
epoch of the Shar training loader for `--replicas` ranks of `--workers` workers (`SharLoader.plan`: lhotse's
sampler per worker over its shards' metadata, every rank equalised to one batch count).

``audio``: where the CPU time of one utterance goes (`--seconds` of `--channels`-channel audio at `--rate`):
decoding wav and flac with soundfile, averaging the channels (numpy's `mean(axis=1)`, which the loader used,
against the column sum it uses now), libsoxr at each quality, in ms per utterance (median of `--repeats`).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from asr_plugin.audio.reading import mix_down
from asr_plugin.data import (
    CorpusLayout,
    DurationBatchSampler,
    ManifestDataset,
    ManifestEntry,
    NemoManifestSource,
    audio_problems,
    prepare_split,
    read_manifest,
    write_manifest,
)
from asr_plugin.data.loading.shar_stream import SharLoader, SharStream, SharTrainingDataset, buffer_size, survey
from asr_plugin.data.sources.shar_directory import shar_shards
from asr_plugin.frontend.spec import build_frontend
from asr_plugin.text import LIBRISPEECH_NORMALIZER, Tokenizer, train_tokenizer
from asr_plugin.user_errors import exit_on_user_error

FILES_PER_CHAPTER = 113  # 281,241 utterances in 2,484 chapters
WORDS = "THE OF AND TO A IN HE I THAT WAS IT HIS YOU WITH AS HAD FOR HER NOT BUT AT BE SHE ON IS".split()


def _make_files(directory: Path, count: int) -> list[ManifestEntry]:
    entries = []
    for n in range(count):
        chapter = directory / str(n // FILES_PER_CHAPTER)
        if n % FILES_PER_CHAPTER == 0:
            chapter.mkdir(parents=True)
        path = chapter / f"{n}.flac"
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x")
        os.close(fd)
        text = " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(20 + n % 15))  # ~34 words, as LibriSpeech
        entries.append(ManifestEntry(str(n), str(path), 12.3, text))
    return entries


def _timed(function, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def _row(name: str, times: list[float], count: int) -> str:
    median = statistics.median(times)
    spread = f"{min(times):.2f}-{max(times):.2f}"
    return f"| {name} | {median:.2f} | {spread} | {count / median / 1000:.0f}k |"


def check(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(dir=args.tmp_dir) as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        entries = _make_files(tmp / "corpus", args.entries)
        manifest = write_manifest(entries, tmp / "train.jsonl")
        print(f"made {args.entries} files and their manifest in {time.perf_counter() - start:.1f} s")
        if args.drop_caches:
            subprocess.run(["sync"], check=True)
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            cold = _timed(lambda: audio_problems(read_manifest(manifest), num_threads=16), 1)
        print(f"\n| step ({args.entries} entries) | median s | min-max s ({args.repeats} runs) | entries/s |")
        print("|---|---|---|---|")
        if args.drop_caches:
            print(_row("read + check, 16 threads, cold page cache", cold, args.entries))
        print(_row("read_manifest", _timed(lambda: read_manifest(manifest), args.repeats), args.entries))
        for threads in (1, 4, 16):
            times = _timed(lambda t=threads: audio_problems(entries, num_threads=t), args.repeats)
            print(_row(f"audio_problems, {threads} thread(s)", times, args.entries))
        texts = [entry.text for entry in entries]
        print(
            _row(
                "normalize_all (LibriSpeech, upper case)",
                _timed(lambda: LIBRISPEECH_NORMALIZER.normalize_all(texts), args.repeats),
                args.entries,
            )
        )
        lower = [text.lower() for text in texts]
        print(
            _row(
                "normalize_all (upper-case normaliser, lower-case text)",
                _timed(lambda: LIBRISPEECH_NORMALIZER.normalize_all(lower), args.repeats),
                args.entries,
            )
        )
        assert audio_problems(entries) == []


def loader(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)  # as in a DataLoader worker
    with tempfile.TemporaryDirectory(dir=args.tmp_dir) as tmp:
        tmp = Path(tmp)
        script = Path(__file__).resolve().parent / "make_synthetic_librispeech.py"
        subprocess.run(
            [
                sys.executable,
                str(script),
                "--root",
                str(tmp / "LibriSpeech"),
                "--split",
                f"train-clean-100:{args.utterances}",
                "--min-seconds",
                str(args.min_seconds),
                "--max-seconds",
                str(args.max_seconds),
            ],
            check=True,
            capture_output=True,
        )
        layout = CorpusLayout(tmp / "LibriSpeech", tmp / "work")
        entries = read_manifest(prepare_split(layout, "train-clean-100", progress=False))
        if args.source in ("nemo", "shar"):
            manifest = _long_recordings_manifest(entries, tmp / "own", args.rate, args.channels, args.format)
            entries = read_manifest(
                prepare_split(
                    CorpusLayout(None, tmp / "work_nemo"),
                    "train",
                    progress=False,
                    source=NemoManifestSource(train_manifests=[str(manifest)]),
                )
            )
        tokenizer: Tokenizer = train_tokenizer(
            (e.text for e in entries), layout.tokenizer("bpe", args.vocab_size), args.vocab_size
        )
        audio_seconds = sum(e.duration for e in entries)
        frontends = {
            "logmel": {"kind": "logmel", "options": {"num_mel_bins": 80}, "mean": [0.0] * 80, "std": [1.0] * 80},
            "nemo": {"kind": "nemo", "options": {"num_mel_bins": 80}},
        }
        read_as = {
            "librispeech": "",
            "nemo": f", read as segments of {args.channels}-channel {args.rate} Hz {args.format} recordings (4 utterances "
            "each) through a NeMo manifest",
            "shar": f", {args.channels}-channel {args.rate} Hz {args.format} in a Lhotse Shar directory (4 shards), "
            "streamed",
        }[args.source]
        shar = _write_shar(entries, tmp / "shar", args.format) if args.source == "shar" else None
        print(
            f"\n{len(entries)} utterances, {audio_seconds / 60:.1f} min of audio "
            f"({args.min_seconds:g}-{args.max_seconds:g} s each){read_as}, one process, torch threads 1\n"
        )
        print(f"| front end | speed perturbation | audio s per CPU s: median | min-max ({args.repeats} runs) |")
        print("|---|---|---|---|")
        for name, spec in frontends.items():
            for factors in (None, (0.9, 1.0, 1.1)):
                if shar is None:
                    dataset = ManifestDataset(entries, tokenizer, build_frontend(spec).train(), factors)
                    items = lambda dataset=dataset: [dataset[index] for index in range(len(dataset))]  # noqa: E731
                else:
                    items = _shar_items(shar, tokenizer, build_frontend(spec).train(), factors, args.max_seconds)
                rates = []
                for _ in range(args.repeats):
                    start = time.process_time()
                    items()
                    rates.append(audio_seconds / (time.process_time() - start))
                print(
                    f"| {name} | {'0.9/1.0/1.1' if factors else 'off'} | {statistics.median(rates):.0f} | "
                    f"{min(rates):.0f}-{max(rates):.0f} |"
                )


def _long_recordings_manifest(
    entries: list[ManifestEntry], out: Path, rate: int, channels: int, audio_format: str = "flac"
) -> Path:
    """The utterances resampled to `rate`, copied to `channels` channels, concatenated 4 at a time into flac
    recordings under `out`, and the NeMo manifest of their segments (relative paths, offsets)."""
    import json

    import soundfile as sf
    import torchaudio

    out.mkdir(parents=True)
    lines = []
    for number in range(0, len(entries), 4):
        path, pieces, cursor = out / f"long_{number:04d}.{audio_format}", [], 0
        for entry in entries[number : number + 4]:
            audio = torchaudio.functional.resample(entry.load_audio(16000), 16000, rate)
            lines.append(
                json.dumps(
                    {
                        "audio_filepath": path.name,
                        "offset": cursor / rate,
                        "duration": audio.numel() / rate,
                        "text": entry.text,
                    }
                )
            )
            pieces.append(audio)
            cursor += audio.numel()
        sf.write(str(path), torch.cat(pieces).unsqueeze(1).repeat(1, channels).numpy(), rate, subtype="PCM_16")
    manifest = out / "train.json"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def _write_shar(entries: list[ManifestEntry], out: Path, audio_format: str) -> Path:
    """The segments as cuts of their recordings, written with lhotse's SharWriter (`audio_format`, 4 shards)."""
    from lhotse import Recording, SupervisionSegment
    from lhotse.shar import SharWriter

    out.mkdir(parents=True)
    recordings = {}
    with SharWriter(str(out), fields={"recording": audio_format}, shard_size=-(-len(entries) // 4)) as writer:
        for entry in entries:
            recording = recordings.setdefault(entry.path, Recording.from_file(entry.path))
            cut = recording.to_cut().truncate(offset=entry.offset or 0.0, duration=entry.duration)
            cut.supervisions = [
                SupervisionSegment(entry.id, recording.id, 0.0, cut.duration, channel=cut.channel, text=entry.text)
            ]
            writer.write(cut)
    return out


def _shar_items(shar: Path, tokenizer: Tokenizer, frontend, factors, longest: float):
    """One epoch of the Shar training loader in this process (num_workers 0), its plan made beforehand."""
    probe = SharStream(tuple(shar_shards(shar)), max_duration=2 * longest, duration_bins=())
    stream = replace(probe, duration_bins=survey(probe, 2).duration_bins)
    dataset = SharTrainingDataset(stream, tokenizer, frontend, factors)
    loader = SharLoader(dataset)
    loader.plan(0)  # the metadata pass, not what a worker does per utterance
    return lambda: list(loader)


def _durations(count: int, seed: int = 0) -> list[float]:
    """A LibriSpeech-like mix of utterance durations (seconds)."""
    rng = random.Random(seed)
    draws = []
    for _ in range(count):
        u = rng.random()
        low, high = (10.0, 17.0) if u < 0.75 else (1.0, 10.0) if u < 0.99 else (17.0, 35.0)
        draws.append(round(rng.uniform(low, high), 2))
    return draws


def _padding(batches: list[list[float]]) -> float:
    """Fraction of the padded seconds that are padding."""
    padded = sum(len(batch) * max(batch) for batch in batches)
    return 1.0 - sum(sum(batch) for batch in batches) / padded


class _Ours:
    name = "DurationBatchSampler (ours)"

    def __init__(self, durations: list[float], args: argparse.Namespace):
        self.durations, self.args = durations, args

    def make(self, rank: int = 0, replicas: int = 1) -> DurationBatchSampler:
        return DurationBatchSampler(
            self.durations,
            self.args.max_duration,
            self.args.num_buckets,
            seed=0,
            num_replicas=replicas,
            rank=rank,
            quadratic_duration=self.args.quadratic_duration,
        )

    def batches(self, sampler) -> list[list[int]]:
        return list(sampler)

    def resume(self, sampler, consumed: int):
        fresh = self.make()
        fresh.load_state_dict(sampler.state_dict(consumed))
        return fresh


class _Lhotse:
    name = "DynamicBucketingSampler (lhotse 1.33)"

    def __init__(self, durations: list[float], args: argparse.Namespace):
        from lhotse import CutSet, MonoCut

        self.args = args
        self.cuts = CutSet.from_cuts(
            MonoCut(id=str(i), start=0.0, duration=d, channel=0) for i, d in enumerate(durations)
        )

    def make(self, rank: int = 0, replicas: int = 1):
        from lhotse.dataset import DynamicBucketingSampler

        return DynamicBucketingSampler(
            self.cuts,
            max_duration=self.args.max_duration,
            num_buckets=self.args.num_buckets,
            shuffle=True,
            seed=0,
            world_size=replicas,
            rank=rank,
            sync_buckets=True,
            quadratic_duration=self.args.quadratic_duration,
        )

    def batches(self, sampler) -> list[list[int]]:
        return [[int(cut.id) for cut in batch] for batch in sampler]

    def resume(self, sampler, consumed: int):
        sampler = self.make()
        iterator = iter(sampler)
        for _ in range(consumed):
            next(iterator)
        state = sampler.state_dict()
        fresh = self.make()
        fresh.load_state_dict(state)
        return fresh


def sampler(args: argparse.Namespace) -> None:
    import warnings

    warnings.filterwarnings("ignore", message="You are using DynamicBucketingSampler with an eagerly read CutSet")
    durations = _durations(args.entries)
    print(
        f"{args.entries} utterances, {sum(durations) / 3600:.0f} h, max_duration {args.max_duration:g} s, "
        f"{args.num_buckets} buckets, quadratic_duration {args.quadratic_duration}, {args.replicas} DDP ranks\n"
    )
    print(
        "| sampler | batches per s (one epoch, median of runs) | min-max | batches | padding % | DDP: batches "
        "per rank | DDP: used once | DDP: longest-utterance spread per step (median, max) | resume exact |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in (_Ours, _Lhotse):
        built = kind(durations, args)
        rates, batches = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            batches = built.batches(built.make())
            rates.append(len(batches) / (time.perf_counter() - start))
        padding = _padding([[durations[i] for i in batch] for batch in batches])
        ranks = [built.batches(built.make(rank, args.replicas)) for rank in range(args.replicas)]
        counts = sorted({len(batches) for batches in ranks})
        used = sorted(i for batches in ranks for batch in batches for i in batch)
        once = "yes" if used == list(range(args.entries)) else f"no ({len(used)} used, {len(set(used))} distinct)"
        steps = min(counts)
        spreads = sorted(
            max(max(durations[i] for i in r[step]) for r in ranks)
            - min(max(durations[i] for i in r[step]) for r in ranks)
            for step in range(steps)
        )
        half = len(batches) // 2
        rest = built.batches(built.resume(built.make(), half))
        exact = "yes" if rest == batches[half:] else f"no ({len(rest)} batches, {len(batches) - half} expected)"
        print(
            f"| {built.name} | {statistics.median(rates):.0f} | {min(rates):.0f}-{max(rates):.0f} | {len(batches)} | "
            f"{100 * padding:.1f} | {'-'.join(map(str, counts))} | {once} | "
            f"{statistics.median(spreads):.1f} s, {spreads[-1]:.1f} s | {exact} |"
        )
    if args.shar:
        with tempfile.TemporaryDirectory(dir=args.tmp_dir) as tmp:
            _shar_plan(durations, args, Path(tmp))


def audio(args: argparse.Namespace) -> None:
    import io

    import numpy as np
    import soundfile as sf
    import soxr

    rng = np.random.default_rng(0)
    frames = int(args.seconds * args.rate)
    t = np.arange(frames) / args.rate
    tone = 0.3 * np.sin(2 * np.pi * 220 * t)[:, None] + 0.05 * rng.standard_normal((frames, args.channels))
    samples = tone.astype("float32")

    def ms(function) -> str:
        times = []
        for _ in range(args.repeats):
            start = time.process_time()
            function()
            times.append(1000 * (time.process_time() - start))
        return f"{statistics.median(times):.1f} ({min(times):.1f}-{max(times):.1f})"

    print(
        f"{args.seconds:g} s of {args.channels}-channel {args.rate} Hz audio, one process; CPU ms, median (min-max)\n"
    )
    print("| step | ms |")
    print("|---|---|")
    for kind, subtype in (("WAV", "PCM_16"), ("FLAC", "PCM_16")):
        encoded = io.BytesIO()
        sf.write(encoded, samples, args.rate, format=kind, subtype=subtype)
        data = encoded.getvalue()
        print(
            f"| decode {kind.lower()} 16-bit (soundfile, float32) | {ms(lambda d=data: sf.read(io.BytesIO(d), dtype='float32'))} |"
        )
    print(f"| channel average, numpy mean(axis=1) (before) | {ms(lambda: samples.mean(axis=1))} |")
    print(f"| channel average, column sum `mix_down` (now) | {ms(lambda: mix_down(samples))} |")
    mono = mix_down(samples)
    for quality in ("VHQ", "HQ", "MQ", "LQ"):
        print(
            f"| libsoxr {args.rate} -> 16000 Hz, quality {quality} | {ms(lambda q=quality: soxr.resample(mono, args.rate, 16000, quality=q))} |"
        )


def _shar_plan(durations: list[float], args: argparse.Namespace, directory: Path) -> None:
    """Plans one epoch of the Shar training loader over a Shar directory holding only the durations' metadata."""
    import gzip
    import json

    from lhotse import MonoCut, SupervisionSegment

    shards = []
    for number, start in enumerate(range(0, len(durations), 1000)):
        path = directory / f"cuts.{number:06d}.jsonl.gz"
        with gzip.open(path, "wt") as handle:
            for index in range(start, min(start + 1000, len(durations))):
                cut = MonoCut(str(index), 0.0, durations[index], channel=0)
                cut.supervisions = [SupervisionSegment(str(index), "r", 0.0, durations[index], text="A")]
                handle.write(json.dumps(cut.to_dict()) + "\n")
        shards.append({"cuts": path, "recording": directory / f"recording.{number:06d}.tar"})  # never read
    layout = dict(max_duration=args.max_duration, quadratic_duration=args.quadratic_duration, seed=0)
    found = survey(SharStream(tuple(shards), duration_bins=(), **layout), args.num_buckets)
    stream = SharStream(
        tuple(shards),
        duration_bins=found.duration_bins,
        num_replicas=args.replicas,
        num_workers=args.workers,
        buffer_size=buffer_size(found, args.max_duration),
        **layout,
    )
    rates = []
    for _ in range(args.repeats):  # what every rank does before an epoch: all ranks' batches from the metadata
        start = time.perf_counter()
        loader = SharLoader(SharTrainingDataset(stream, None, None))
        per_rank = len(loader)
        rates.append(per_rank * args.replicas / (time.perf_counter() - start))
    natural = [stream.natural_batches(0, 0, w) for w in range(stream.streams_per_rank)]
    padded = sum(len(batch) * max(batch) for batches in natural for batch in batches)
    real = sum(sum(batch) for batches in natural for batch in batches)
    print(
        f"| Shar training loader (lhotse's sampler per worker, {args.workers} workers per rank, equalised) | "
        f"{statistics.median(rates):.0f} | {min(rates):.0f}-{max(rates):.0f} | {per_rank * args.replicas} | "
        f"{100 * (1 - real / padded):.1f} (rank 0, before splits/merges) | {per_rank} on every rank (by "
        "construction) | yes (tests/data/test_shar.py) | - | the same batches, interleaved anew (tests/data/test_shar.py) |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    check_parser = sub.add_parser("check", help="the manifest check at the start of training")
    check_parser.add_argument("--entries", type=int, default=281241)
    check_parser.add_argument("--drop-caches", action="store_true", help="empty the page cache first (root)")
    loader_parser = sub.add_parser("loader", help="audio seconds per CPU second of one loader worker")
    loader_parser.add_argument("--utterances", type=int, default=24)
    loader_parser.add_argument("--min-seconds", type=float, default=8.0)
    loader_parser.add_argument("--max-seconds", type=float, default=30.0)
    loader_parser.add_argument("--vocab-size", type=int, default=500, help="of the BPE tokenizer (LibriSpeech's)")
    loader_parser.add_argument(
        "--source",
        choices=("librispeech", "nemo", "shar"),
        default="librispeech",
        help="nemo: read the utterances as segments of long recordings via a NeMo manifest; shar: those segments "
        "streamed from a Lhotse Shar directory",
    )
    loader_parser.add_argument("--rate", type=int, default=48000, help="sample rate of the nemo/shar recordings")
    loader_parser.add_argument("--channels", type=int, default=2, help="channels of the nemo/shar recordings")
    loader_parser.add_argument("--format", choices=("flac", "wav"), default="flac", help="of the nemo/shar audio")
    sampler_parser = sub.add_parser("sampler", help="our batch sampler against lhotse's DynamicBucketingSampler")
    sampler_parser.add_argument("--entries", type=int, default=281241)
    sampler_parser.add_argument("--replicas", type=int, default=8)
    sampler_parser.add_argument("--max-duration", type=float, default=600.0)
    sampler_parser.add_argument("--num-buckets", type=int, default=30)
    sampler_parser.add_argument("--quadratic-duration", type=float, default=None)
    sampler_parser.add_argument("--shar", action="store_true", help="also plan the Shar training loader's epoch")
    sampler_parser.add_argument("--workers", type=int, default=2, help="loader workers per rank (--shar)")
    audio_parser = sub.add_parser("audio", help="where one utterance's decoding and resampling time goes")
    audio_parser.add_argument("--seconds", type=float, default=30.0)
    audio_parser.add_argument("--rate", type=int, default=48000)
    audio_parser.add_argument("--channels", type=int, default=2)
    for each in (check_parser, loader_parser, sampler_parser, audio_parser):
        each.add_argument("--repeats", type=int, default=3)
        each.add_argument("--tmp-dir", default=None, help="where the temporary files go (default: $TMPDIR)")
    args = parser.parse_args(argv)
    {"check": check, "loader": loader, "sampler": sampler, "audio": audio}[args.what](args)


if __name__ == "__main__":
    exit_on_user_error()(main)()
