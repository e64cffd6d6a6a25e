"""Duration-bucketed dynamic batch sampler: deterministic, DDP-aware with buckets synchronised across
ranks, and resumable mid-epoch.

Each epoch (seed + epoch fixes every random choice):
1. utterances are grouped into `num_buckets` buckets of similar duration (quantiles, fixed at init);
2. each bucket is shuffled and cut into batches of a fixed size per bucket,
   `max_duration // cost(longest utterance of the bucket)`, so the padded cost `len(batch) * cost(longest)`
   stays <= `max_duration` whatever the shuffle, and the number of batches is the same every epoch
   (Lightning reads `len()` once: a varying count skipped validation). `cost(d)` is `d`, or
   `d + d**2 / quadratic_duration` (lhotse's penalty: transducer lattices grow with T * U);
3. with R replicas, each bucket's batches form steps of R batches; the fewer than R left over in each
   bucket are pooled in duration order (neighbouring buckets), the largest of them halved until their
   count is a multiple of R, and grouped into steps too (every utterance is used exactly once);
4. the steps are shuffled and rank r takes batch r of every step: at each step all ranks run batches of
   the same (or, for the pooled remainders, a neighbouring) bucket, so none waits for a rank with much
   longer utterances (lhotse's `sync_buckets`, NeMo's `synced_randomized`), and every rank runs the same
   number of steps.

Without shuffling (validation/test) utterances are sorted by duration and nothing is shuffled.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch.distributed as dist
from torch.utils.data import Sampler


def world() -> tuple[int, int]:
    """(world size, rank) of torch.distributed; (1, 0) when it is not initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


class DurationBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices.

    Args:
        durations: seconds per dataset index.
        max_duration: limit on the padded cost (seconds) per batch; a single utterance costing more raises
            ValueError (filter those out first, or raise the limit).
        num_buckets: duration buckets used when shuffling.
        shuffle: shuffle within buckets and batch order (training); False = sorted by duration.
        seed: base seed; the order depends only on (seed, epoch, num_replicas).
        num_replicas, rank: DDP layout; None = from torch.distributed (1 and 0 when not initialised).
        quadratic_duration: None, or Q > 0 to charge an utterance of d seconds `d + d**2 / Q`.

    Resuming: `state_dict(batches_consumed)` records how many of this rank's batches of the current epoch
    were used; after `load_state_dict`, the next iteration of that epoch yields only the rest.
    """

    def __init__(
        self,
        durations: Sequence[float],
        max_duration: float,
        num_buckets: int = 10,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        quadratic_duration: float | None = None,
    ):
        super().__init__()
        if max_duration <= 0:
            raise ValueError(f"max_duration must be positive, got {max_duration}")
        if num_buckets < 1:
            raise ValueError(f"num_buckets must be >= 1, got {num_buckets}")
        if quadratic_duration is not None and quadratic_duration <= 0:
            raise ValueError(f"quadratic_duration must be positive or None, got {quadratic_duration}")
        self.quadratic_duration = quadratic_duration
        too_long = [i for i, d in enumerate(durations) if self.cost(d) > max_duration]
        if too_long:
            raise ValueError(
                f"durations: {len(too_long)} utterance(s) cost more than max_duration={max_duration} s "
                f"(first index {too_long[0]}: {durations[too_long[0]]} s, quadratic_duration="
                f"{quadratic_duration}); filter them out first or raise max_duration"
            )
        world_size, world_rank = world()
        self.num_replicas = world_size if num_replicas is None else num_replicas
        self.rank = world_rank if rank is None else rank
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"rank must be in [0, num_replicas={self.num_replicas}), got {self.rank}")
        if len(durations) < self.num_replicas:
            raise ValueError(f"durations: {len(durations)} utterance(s) cannot feed {self.num_replicas} replicas")
        self.durations = [float(d) for d in durations]
        self.max_duration = float(max_duration)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        by_duration = sorted(range(len(self.durations)), key=lambda i: (self.durations[i], i))
        size = -(-len(by_duration) // num_buckets)
        self.buckets = [by_duration[i : i + size] for i in range(0, len(by_duration), size)]
        self._resume: tuple[int, int] | None = None  # (epoch, batches already consumed)
        self._cache: tuple[int, list[list[int]]] | None = None  # (epoch, all replicas' batches)

    def cost(self, duration: float) -> float:
        """What one utterance of `duration` seconds counts against `max_duration` (per batch member)."""
        if self.quadratic_duration is None:
            return duration
        return duration + duration * duration / self.quadratic_duration

    @property
    def sampler(self) -> "DurationBatchSampler":
        """Lightning calls `batch_sampler.sampler.set_epoch(epoch)` at each epoch; this lets it reach us."""
        return self

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch whose order the next iteration produces."""
        self.epoch = epoch

    def _pack(self, indices: list[int]) -> list[list[int]]:
        batches: list[list[int]] = []
        current: list[int] = []
        longest = 0.0
        for index in indices:
            new_longest = max(longest, self.durations[index])
            if current and self.cost(new_longest) * (len(current) + 1) > self.max_duration:
                batches.append(current)
                current, new_longest = [], self.durations[index]
            current.append(index)
            longest = new_longest
        if current:
            batches.append(current)
        return batches

    def _equalise(self, batches: list[list[int]]) -> list[list[int]]:
        """Halves the largest batches (ties: earliest) until the count is a multiple of num_replicas.

        Only when every batch holds a single utterance (max_duration below twice the shortest pair) are the
        first batches repeated instead, as DistributedSampler does.
        """
        while len(batches) % self.num_replicas:
            position = max(range(len(batches)), key=lambda i: (len(batches[i]), -i))
            batch = batches[position]
            if len(batch) < 2:
                missing = self.num_replicas - len(batches) % self.num_replicas
                return batches + (batches * missing)[:missing]
            half = len(batch) // 2
            batches[position : position + 1] = [batch[:half], batch[half:]]
        return batches

    def _all_batches(self) -> list[list[int]]:
        """All replicas' batches of the current epoch, in order (cached: Lightning asks len() often)."""
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, self._build_batches())
        return self._cache[1]

    def _build_batches(self) -> list[list[int]]:
        if not self.shuffle:
            return self._equalise(self._pack([i for bucket in self.buckets for i in bucket]))
        rng = random.Random(f"{self.seed}:{self.epoch}")
        replicas = self.num_replicas
        steps: list[list[list[int]]] = []  # R batches each
        remainders: list[list[int]] = []  # each bucket's last (count mod R) batches, in duration order
        for bucket in self.buckets:
            size = max(1, int(self.max_duration // self.cost(self.durations[bucket[-1]])))  # buckets are sorted
            bucket = list(bucket)
            rng.shuffle(bucket)
            batches = [bucket[i : i + size] for i in range(0, len(bucket), size)]
            whole = len(batches) - len(batches) % replicas
            steps += [batches[i : i + replicas] for i in range(0, whole, replicas)]
            remainders += batches[whole:]
        remainders = self._equalise(remainders)
        steps += [remainders[i : i + replicas] for i in range(0, len(remainders), replicas)]
        rng.shuffle(steps)
        return [batch for step in steps for batch in step]

    def epoch_batches(self) -> list[list[int]]:
        """This rank's batches of the current epoch (ignoring any resume point)."""
        return self._all_batches()[self.rank :: self.num_replicas]

    def resume_offset(self) -> int:
        """Batches of the current epoch that the next iteration skips (0 unless resuming)."""
        return self._resume[1] if self._resume is not None and self._resume[0] == self.epoch else 0

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.epoch_batches()
        skip = self.resume_offset()
        self._resume = None
        yield from batches[skip:]

    def __len__(self) -> int:
        return len(self._all_batches()) // self.num_replicas

    def state_dict(self, batches_consumed: int = 0) -> dict:
        """The resume point: this epoch and the number of this rank's batches already used."""
        return {
            "epoch": self.epoch,
            "batches_consumed": int(batches_consumed),
            "seed": self.seed,
            "num_replicas": self.num_replicas,
        }

    def load_state_dict(self, state: dict) -> None:
        """Makes the next iteration of `state["epoch"]` skip the batches already consumed."""
        if state.get("seed", self.seed) != self.seed or state.get("num_replicas") != self.num_replicas:
            raise ValueError(
                f"sampler state {state} was saved with another seed or num_replicas "
                f"(now seed={self.seed}, num_replicas={self.num_replicas})"
            )
        self.epoch = int(state["epoch"])
        self._resume = (self.epoch, int(state["batches_consumed"]))
