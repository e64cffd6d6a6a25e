"""DurationBatchSampler invariants: coverage, limits, quadratic cost, DDP split with synchronised buckets,
determinism, resume."""

from __future__ import annotations

import random

import pytest

from asr_plugin.data import DurationBatchSampler


def _durations(n=300, seed=0):
    rng = random.Random(seed)
    return [round(rng.uniform(0.5, 16.0), 2) for _ in range(n)]


def _flat(batches):
    return [i for batch in batches for i in batch]


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_utterance_once_and_limit_respected(shuffle):
    durations = _durations()
    sampler = DurationBatchSampler(
        durations, max_duration=60.0, num_buckets=6, shuffle=shuffle, seed=1, num_replicas=1, rank=0
    )
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(_flat(batches)) == list(range(len(durations)))
        for batch in batches:
            assert len(batch) * max(durations[i] for i in batch) <= 60.0
            assert sum(durations[i] for i in batch) <= 60.0


def test_unshuffled_batches_are_sorted_by_duration():
    durations = _durations()
    order = _flat(DurationBatchSampler(durations, 40.0, shuffle=False, num_replicas=1, rank=0))
    assert [durations[i] for i in order] == sorted(durations)


def test_buckets_group_similar_durations():
    durations = _durations(1000)
    batches = list(DurationBatchSampler(durations, 100.0, num_buckets=10, num_replicas=1, rank=0))
    spreads = [max(durations[i] for i in b) - min(durations[i] for i in b) for b in batches]
    assert sum(spreads) / len(spreads) < 2.0  # about one bucket width (15.5 s / 10)


@pytest.mark.parametrize("replicas", [1, 3])
def test_batch_count_is_the_same_every_epoch(replicas):
    """Lightning reads len() once per fit; a count that changed with the epoch skipped validation."""
    sampler = DurationBatchSampler(
        _durations(), max_duration=45.0, num_buckets=6, seed=2, num_replicas=replicas, rank=0
    )
    counts = set()
    for epoch in range(8):
        sampler.set_epoch(epoch)
        counts.add(len(list(sampler)))
    assert counts == {len(sampler)}


def test_deterministic_per_seed_and_epoch():
    durations = _durations()

    def order(seed, epoch):
        sampler = DurationBatchSampler(durations, 50.0, seed=seed, num_replicas=1, rank=0)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert order(0, 0) == order(0, 0)
    assert order(0, 0) != order(0, 1)
    assert order(0, 0) != order(1, 0)
    assert order(3, 2) == order(3, 2)


@pytest.mark.parametrize("replicas", [2, 3, 4, 7])
def test_ddp_ranks_disjoint_equal_length_and_complete(replicas):
    durations = _durations(203)
    for epoch in range(2):
        per_rank = []
        for rank in range(replicas):
            sampler = DurationBatchSampler(durations, 45.0, seed=5, num_replicas=replicas, rank=rank)
            sampler.set_epoch(epoch)
            per_rank.append(list(sampler))
            assert len(per_rank[-1]) == len(sampler)
        assert len({len(batches) for batches in per_rank}) == 1
        seen = [_flat(batches) for batches in per_rank]
        assert sorted(i for s in seen for i in s) == list(range(len(durations)))
        for a in range(replicas):
            for b in range(a + 1, replicas):
                assert not set(seen[a]) & set(seen[b])


def test_ddp_with_only_single_utterance_batches_pads_by_repeating():
    durations = [3.0] * 5  # each batch can hold one utterance only
    lengths = [len(list(DurationBatchSampler(durations, 4.0, num_replicas=2, rank=r))) for r in range(2)]
    assert lengths == [3, 3]


def test_ddp_defaults_to_single_process():
    sampler = DurationBatchSampler(_durations(10), 30.0)
    assert (sampler.num_replicas, sampler.rank) == (1, 0)


def test_resume_mid_epoch_yields_the_rest():
    durations = _durations()
    sampler = DurationBatchSampler(durations, 50.0, seed=2, num_replicas=2, rank=1)
    sampler.set_epoch(4)
    full = list(sampler)
    state = sampler.state_dict(batches_consumed=7)
    assert state["epoch"] == 4 and state["batches_consumed"] == 7

    restored = DurationBatchSampler(durations, 50.0, seed=2, num_replicas=2, rank=1)
    restored.load_state_dict(state)
    restored.set_epoch(4)  # Lightning sets the epoch again after loading: the resume point survives
    assert list(restored) == full[7:]
    assert list(restored) == full  # only the first iteration after loading is shortened
    restored.load_state_dict(state)
    restored.set_epoch(5)  # a different epoch starts from its beginning
    assert len(list(restored)) == len(restored)


def test_errors():
    with pytest.raises(ValueError, match="cost more than max_duration"):
        DurationBatchSampler([1.0, 30.0], 20.0)
    with pytest.raises(ValueError, match="cost more than max_duration"):  # 15 + 15**2 / 10 = 37.5
        DurationBatchSampler([1.0, 15.0], 20.0, quadratic_duration=10.0)
    with pytest.raises(ValueError, match="quadratic_duration must be positive"):
        DurationBatchSampler([1.0], 20.0, quadratic_duration=0.0)
    with pytest.raises(ValueError, match="max_duration must be positive"):
        DurationBatchSampler([1.0], 0.0)
    with pytest.raises(ValueError, match="rank must be in"):
        DurationBatchSampler([1.0, 2.0], 10.0, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="cannot feed 4 replicas"):
        DurationBatchSampler([1.0, 2.0], 10.0, num_replicas=4, rank=0)
    sampler = DurationBatchSampler([1.0, 2.0], 10.0, seed=0)
    with pytest.raises(ValueError, match="another seed"):
        sampler.load_state_dict({"epoch": 0, "batches_consumed": 1, "seed": 9, "num_replicas": 1})


def _bucket_of(sampler):
    return {i: b for b, bucket in enumerate(sampler.buckets) for i in bucket}


@pytest.mark.parametrize("replicas", [2, 4])
def test_ranks_run_batches_of_the_same_bucket_at_every_step(replicas):
    durations = _durations(400, seed=3)
    samplers = [
        DurationBatchSampler(durations, 40.0, num_buckets=8, seed=1, num_replicas=replicas, rank=r)
        for r in range(replicas)
    ]
    bucket = _bucket_of(samplers[0])
    for epoch in range(3):
        for sampler in samplers:
            sampler.set_epoch(epoch)
        per_rank = [list(sampler) for sampler in samplers]
        assert len({len(batches) for batches in per_rank}) == 1
        mixed = 0
        for step in zip(*per_rank):
            buckets = {bucket[i] for batch in step for i in batch}
            # only the pooled remainders (< R batches per bucket) may span neighbouring buckets
            assert max(buckets) - min(buckets) <= len(samplers[0].buckets) - 1
            mixed += len(buckets) > 1
        # at most (R - 1) remainder batches per bucket -> at most that many steps of pooled remainders
        assert mixed <= (replicas - 1) * 8 // replicas + 1
        assert mixed < len(per_rank[0]) // 4
        assert sorted(_flat(b for batches in per_rank for b in batches)) == list(range(len(durations)))


def test_quadratic_duration_shrinks_batches_of_long_utterances():
    durations = [2.0] * 100 + [30.0] * 100
    linear = DurationBatchSampler(durations, 300.0, num_buckets=2, num_replicas=1, rank=0)
    quadratic = DurationBatchSampler(durations, 300.0, num_buckets=2, num_replicas=1, rank=0, quadratic_duration=30.0)
    assert quadratic.cost(30.0) == 60.0 and quadratic.cost(2.0) == pytest.approx(2.0 + 4.0 / 30.0)

    def sizes(sampler, duration):
        return {len(b) for b in sampler if durations[b[0]] == duration}

    assert sizes(linear, 30.0) == {10} and sizes(quadratic, 30.0) == {5}  # 300 // 30 and 300 // 60
    assert sizes(linear, 2.0) == {100} and sizes(quadratic, 2.0) == {100}  # short ones barely change (140 fit)
    for batch in quadratic:
        assert len(batch) * quadratic.cost(max(durations[i] for i in batch)) <= 300.0
