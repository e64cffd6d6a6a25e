"""Lhotse Shar training data, streamed: ``data=lhotse data.train_shar=<dir>`` (docs/data.md, "Lhotse Shar").

A Shar directory (lhotse's `SharWriter` / `CutSet.to_shar`: ``cuts.NNNNNN.jsonl.gz`` with the metadata of
each shard and ``recording.NNNNNN.tar`` with its audio; listed by `asr_plugin.data.sources.shar_directory`) is
read where it is, shard after shard, never copied: our sampler needs random access to every utterance, so
Shar has a loader of its own, built from lhotse's pieces (the checked cuts of
`asr_plugin.data.sources.shar_cuts`, `DynamicBucketingSampler`) inside an iterable dataset.

An epoch, with R ranks of K loader workers each:

1. the shards are shuffled (seed + epoch, the same order on every rank) and split as lhotse's
   ``split_for_dataloading`` splits them, ``shards[rank::R][worker::K]``: every shard is read by exactly one
   worker of one rank, so every utterance is seen once per epoch. (The slices are taken here rather than
   by lhotse because lhotse reads the rank from the environment of the process it runs in, and step 2 needs
   every rank's split in every rank.)
2. each worker batches its stream with lhotse's `DynamicBucketingSampler` (duration bins estimated once from
   the whole Shar, so every worker buckets alike). DDP needs every rank to run the same number of steps (a
   rank that stops early leaves the others waiting in an all-reduce), so before the epoch each rank runs the
   same samplers over the shards' metadata alone (``cuts.*.jsonl.gz``, no audio: the batches depend only on
   durations and seeds) for *all* ranks, and equalises every rank to one count N: a rank with fewer batches
   splits its largest ones in two (smaller batches, never larger), a rank with more merges pairs of small
   ones (the end-of-bucket remainders) whose cost together stays within `max_duration`. N is fixed by the
   first epoch (Lightning reads the loader's length once: a varying count would skip validation).
3. a worker checks that its stream gave the batches the plan counted, so a Shar that changes under a run
   fails loudly instead of hanging the other ranks.

The tokenizer and the feature statistics of a Shar are made by `asr_plugin.data.preparation.shar`.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from asr_plugin.data.loading.batch import Batch
from asr_plugin.data.loading.dataset import collate_utterances, make_utterance
from asr_plugin.data.sources.shar_cuts import cut_text, read_shar_cuts, shar_cut_audio
from asr_plugin.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)

BINS_SAMPLE = 20000  # cuts whose durations fix the bucket bins (lhotse's own estimate reads 10000)


def cost(duration: float, quadratic_duration: float | None) -> float:
    """What one utterance counts against `max_duration` (lhotse's `TimeConstraint` with its penalty)."""
    return duration if quadratic_duration is None else duration + duration * duration / quadratic_duration


@dataclass(frozen=True)
class SharStream:
    """What every rank and worker of a Shar training loader agrees on (plain, pickled into the workers).

    Args:
        shards: `shar_shards` of the directory.
        max_duration, quadratic_duration: the batch cost limit (`DynamicBucketingSampler`'s).
        max_utterance_duration: longer cuts are left out (None: those costing more than max_duration).
        duration_bins: the sampler's bucket boundaries (`survey`).
        num_replicas, rank, num_workers: the layout (num_workers 0 reads in the main process: one stream).
        seed: of the shard order and the samplers (with the epoch).
    """

    shards: tuple[dict[str, Path], ...]
    max_duration: float
    duration_bins: tuple[float, ...]
    num_replicas: int = 1
    rank: int = 0
    num_workers: int = 0
    seed: int = 0
    quadratic_duration: float | None = None
    max_utterance_duration: float | None = None
    buffer_size: int = 10000

    @property
    def streams_per_rank(self) -> int:
        return max(1, self.num_workers)

    def usable(self, cut: Any) -> bool:
        """A cut the loader trains on: a transcript, and short enough for a batch (the same test on the
        metadata and on the audio stream, so both give the same batches)."""
        if self.max_utterance_duration is not None and cut.duration > self.max_utterance_duration:
            return False
        return cost(cut.duration, self.quadratic_duration) <= self.max_duration and bool(cut_text(cut))

    def stream_shards(self, epoch: int, rank: int, worker: int) -> list[dict[str, Path]]:
        """The shards one worker of one rank reads in `epoch` (see the module docstring, step 1)."""
        order = list(self.shards)
        random.Random(f"{self.seed}:{epoch}").shuffle(order)
        return order[rank :: self.num_replicas][worker :: self.streams_per_rank]

    def cuts(self, shards: Sequence[dict[str, Path]], with_audio: bool):
        """The lazy CutSet of `shards` (metadata only unless `with_audio`), usable cuts only."""
        return read_shar_cuts(shards, with_audio).filter(self.usable)

    def sampler(self, cuts: Any, epoch: int):
        """lhotse's sampler over one stream: rank 0 of 1, since the shards are already split."""
        from lhotse.dataset import DynamicBucketingSampler

        sampler = DynamicBucketingSampler(
            cuts,
            max_duration=self.max_duration,
            duration_bins=list(self.duration_bins),
            shuffle=True,
            seed=self.seed,
            buffer_size=self.buffer_size,
            quadratic_duration=self.quadratic_duration,
            world_size=1,
            rank=0,
        )
        sampler.set_epoch(epoch)
        return sampler

    def natural_batches(self, epoch: int, rank: int, worker: int) -> list[list[float]]:
        """The costs of each cut of every batch lhotse's sampler makes from one stream (metadata only)."""
        shards = self.stream_shards(epoch, rank, worker)
        if not shards:
            return []
        sampler = self.sampler(self.cuts(shards, with_audio=False), epoch)
        return [[cost(cut.duration, self.quadratic_duration) for cut in batch] for batch in sampler]


@dataclass(frozen=True)
class SharSurvey:
    """One pass over a Shar's metadata: cuts, the usable ones and their seconds, and the bucket bins."""

    cuts: int
    usable: int
    seconds: float
    duration_bins: tuple[float, ...]


def survey(stream: SharStream, num_buckets: int) -> SharSurvey:
    """Counts the cuts of `stream.shards` (metadata only) and estimates the sampler's bucket boundaries from
    the first `BINS_SAMPLE` usable ones (lhotse's `estimate_duration_buckets`), fixed once so that every
    worker's sampler buckets alike. ValueError naming the directory when no cut is usable."""
    from lhotse import CutSet
    from lhotse.dataset.sampling.dynamic_bucketing import estimate_duration_buckets

    where = Path(stream.shards[0]["cuts"]).parent
    total = usable = 0
    seconds = 0.0
    sample = []
    for cut in read_shar_cuts(stream.shards, with_audio=False):
        total += 1
        if stream.usable(cut):
            usable += 1
            seconds += cut.duration
            if len(sample) < BINS_SAMPLE:
                sample.append(cut)
    if not usable:
        raise ValueError(
            f"{where}: none of its {total} cut(s) is usable (each needs a transcript and must fit "
            f"max_duration={stream.max_duration} s and max_utterance_duration={stream.max_utterance_duration})"
        )
    buckets = min(num_buckets, len(sample) // 2)
    bins = () if buckets < 2 else estimate_duration_buckets(CutSet.from_cuts(sample), num_buckets=buckets)
    return SharSurvey(total, usable, seconds, tuple(float(b) for b in bins) or (seconds / usable,))


def buffer_size(found: SharSurvey, max_duration: float) -> int:
    """Cuts each worker's sampler holds (with their compressed audio: the loader's memory): twice what fills
    every bucket to `max_duration` at the mean duration (lhotse warns below once that), at least 1000."""
    mean = found.seconds / found.usable
    return max(1000, math.ceil(2 * (len(found.duration_bins) + 1) * max_duration / mean))


def equalise(batches: list[list[list[float]]], target: int, max_duration: float, where: str) -> list[list[int]]:
    """Per stream, per sampler batch, how many batches it becomes (>= 1: split into that many; 0: merged into
    the stream's next batch) so that the rank yields exactly `target` batches (module docstring, step 2).

    Args:
        batches: [stream][batch] -> the costs of its cuts.
    """
    pieces = [[1] * len(stream) for stream in batches]
    natural = sum(map(len, pieces))
    if natural < target:  # split the batches with the most cuts per piece first
        heap = [(-len(b), s, i) for s, stream in enumerate(batches) for i, b in enumerate(stream) if len(b) > 1]
        heapq.heapify(heap)
        for _ in range(target - natural):
            if not heap:
                raise ValueError(
                    f"{where}: a rank has too few utterances for the {target} batches of the others; write the "
                    "Shar with more, smaller shards (at least a few per rank and worker)"
                )
            _, s, i = heapq.heappop(heap)
            pieces[s][i] += 1
            if len(batches[s][i]) > pieces[s][i]:
                heapq.heappush(heap, (-len(batches[s][i]) / pieces[s][i], s, i))
    for _ in range(natural - target):  # merge the cheapest neighbouring pair that fits
        best = None
        for s, stream in enumerate(batches):
            i = 0
            while i < len(stream):  # runs of merged batches (0s) count as one batch ending at the next 1
                j, total = i, sum(stream[i])
                while pieces[s][j] == 0:
                    j += 1
                    total += sum(stream[j])
                if j + 1 < len(stream) and pieces[s][j + 1] == 1:
                    combined = total + sum(stream[j + 1])
                    if combined <= max_duration and (best is None or combined < best[0]):
                        best = (combined, s, j)
                i = j + 1
        if best is None:
            raise ValueError(
                f"{where}: a rank has more full batches than the {target} of the first epoch; write the Shar "
                "with shards of similar duration, or raise max_duration"
            )
        pieces[best[1]][best[2]] = 0
    return pieces


class SharTrainingDataset(IterableDataset):
    """The batches (`Batch`) of one rank's epoch: each loader worker reads its streams' shards (features and
    tokens as `ManifestDataset` makes them) and cuts lhotse's batches as the rank's plan says."""

    def __init__(
        self,
        stream: SharStream,
        tokenizer: Tokenizer,
        frontend: nn.Module,
        speed_factors: Sequence[float] | None = None,
    ):
        self.stream = stream
        self.tokenizer = tokenizer
        self.frontend = frontend
        self.speed_factors = tuple(speed_factors) if speed_factors else None
        self.epoch = 0
        self.plan: list[list[int]] | None = None  # set by `SharLoader` before each epoch
        self.skip: list[int] | None = None  # batches each worker passes over (resuming mid-epoch)

    def _utterance(self, cut: Any):
        sample_rate = self.frontend.sample_rate
        return make_utterance(
            cut.id,
            f"{cut.id} (Shar shard {cut.shard_origin})",
            cut_text(cut),
            shar_cut_audio(cut, sample_rate),
            self.tokenizer,
            self.frontend,
            self.speed_factors,
            sample_rate,
        )

    def __iter__(self) -> Iterator[Batch]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        stream = self.stream
        if self.plan is None or workers != stream.streams_per_rank:
            raise RuntimeError(
                f"SharTrainingDataset: iterate it through SharLoader with num_workers={stream.num_workers}"
            )
        plan = self.plan[worker]
        shards = stream.stream_shards(self.epoch, stream.rank, worker)
        count = 0
        skip = self.skip[worker] if self.skip else 0
        if shards:
            carry: list[Any] = []
            for index, batch in enumerate(stream.sampler(stream.cuts(shards, with_audio=True), self.epoch)):
                count = index + 1
                if index >= len(plan):
                    break
                cuts = carry + list(batch)
                if plan[index] == 0:
                    carry = cuts
                    continue
                carry = []
                bounds = [len(cuts) * k // plan[index] for k in range(plan[index] + 1)]  # exactly plan[index] parts
                for start, end in zip(bounds, bounds[1:]):
                    if skip:  # consumed before the run was resumed: not decoded
                        skip -= 1
                        continue
                    yield collate_utterances([self._utterance(cut) for cut in cuts[start:end]])
        if count != len(plan):
            raise RuntimeError(
                f"{Path(stream.shards[0]['cuts']).parent}: rank {stream.rank} worker {worker} got {count} batches "
                f"from its shards in epoch {self.epoch}, its plan counted {len(plan)} from their metadata: the Shar "
                "directory changed during the run"
            )


def _identity(batch: Batch) -> Batch:
    return batch  # the dataset yields whole batches (batch_size=None)


class SharLoader(DataLoader):
    """DataLoader over a `SharTrainingDataset`: before each epoch it plans every rank's batches from the
    metadata (`equalise`), so that `len()` is the same on every rank and in every epoch.

    Workers are started for each epoch (not persistent): the epoch and its plan travel with the dataset.
    The epoch is `epoch_of()` when that gives one (the data module passes the trainer's), else `set_epoch`'s.

    Resuming: like `ResumableDataLoader`, it counts the batches handed out in the main process; Lightning saves
    `state_dict()` in its checkpoints and calls `load_state_dict()` before resuming, and the next iteration of
    that epoch yields only the rest: the DataLoader takes the workers' batches in turn (a worker that has
    none left drops out), so the count says how many each worker had given, and each worker passes over
    that many of its batches without decoding them (their shards are still read). The rest comes in another
    interleaving (the turn restarts at the first worker): the same batches, each once, and the same count.
    """

    def __init__(
        self,
        dataset: SharTrainingDataset,
        epoch_of: Callable[[], int | None] | None = None,
        pin_memory: bool = False,
    ):
        stream = dataset.stream
        super().__init__(
            dataset,
            batch_size=None,
            collate_fn=_identity,
            num_workers=stream.num_workers,
            pin_memory=pin_memory,
            persistent_workers=False,
        )
        self.epoch_of = epoch_of
        self.epoch = 0
        self._plans: dict[int, list[list[int]]] = {}
        self._target: int | None = None
        self._consumed = 0
        self._resume: tuple[int, int] | None = None  # (epoch, batches of it already consumed)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _current_epoch(self) -> int:
        epoch = self.epoch_of() if self.epoch_of is not None else None
        return self.epoch if epoch is None else epoch

    def plan(self, epoch: int) -> list[list[int]]:
        """This rank's plan of `epoch`: per worker stream, per sampler batch, the batches it becomes."""
        if epoch not in self._plans:
            stream = self.dataset.stream
            where = str(Path(stream.shards[0]["cuts"]).parent)

            def natural(epoch: int) -> list[list[list[list[float]]]]:  # [rank][worker][batch] -> cut costs
                return [
                    [stream.natural_batches(epoch, rank, w) for w in range(stream.streams_per_rank)]
                    for rank in range(stream.num_replicas)
                ]

            ranks = natural(epoch)
            if self._target is None:  # always the first epoch's: a resumed run keeps the count of the first
                self._target = max(sum(map(len, rank)) for rank in (ranks if epoch == 0 else natural(0)))
                log.info("%s: %d batches per rank and epoch", where, self._target)
            self._plans = {epoch: equalise(ranks[stream.rank], self._target, stream.max_duration, where)}
        return self._plans[epoch]

    def __len__(self) -> int:
        plan = self.plan(self._current_epoch())
        return sum(max(p, 0) for stream in plan for p in stream)

    def __iter__(self) -> Iterator[Batch]:
        epoch = self._current_epoch()
        self.dataset.epoch = epoch
        self.dataset.plan = self.plan(epoch)
        skip = self._resume[1] if self._resume is not None and self._resume[0] == epoch else 0
        self._resume = None
        self.dataset.skip = worker_skips(self.dataset.plan, skip)
        self._consumed = skip
        for batch in super().__iter__():
            self._consumed += 1
            yield batch

    def state_dict(self) -> dict:
        """{"epoch", "batches_consumed", "seed", "num_replicas", "num_workers"} of this rank's current epoch."""
        stream = self.dataset.stream
        return {
            "epoch": self.dataset.epoch,
            "batches_consumed": self._consumed,
            "seed": stream.seed,
            "num_replicas": stream.num_replicas,
            "num_workers": stream.num_workers,
        }

    def load_state_dict(self, state: dict) -> None:
        """Makes the next iteration of `state["epoch"]` skip the batches already consumed."""
        stream = self.dataset.stream
        now = {"seed": stream.seed, "num_replicas": stream.num_replicas, "num_workers": stream.num_workers}
        if any(state.get(key) != value for key, value in now.items()):
            raise ValueError(
                f"Shar loader state {state} was saved with another layout (now {now}): the batches of an epoch "
                "depend on the seed, the ranks and the loader workers"
            )
        self._resume = (int(state["epoch"]), int(state["batches_consumed"]))


def worker_skips(plan: list[list[int]], consumed: int) -> list[int]:
    """How many of its batches each worker had given when the rank had consumed `consumed`: the DataLoader
    takes one batch from each worker in turn, and a worker with no batch left drops out of the turn."""
    left = [sum(stream) for stream in plan]
    skips = [0] * len(plan)
    while consumed > 0 and any(left):
        for worker in range(len(plan)):
            if left[worker] and consumed > 0:
                left[worker] -= 1
                skips[worker] += 1
                consumed -= 1
    return skips
