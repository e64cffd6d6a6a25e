"""A DataLoader whose position in the epoch can be saved and restored (Lightning checkpoints it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader

from asr_plugin.data.loading.sampler import DurationBatchSampler


class ResumableDataLoader(DataLoader):
    """DataLoader over a `DurationBatchSampler` that counts the batches it has handed out.

    Lightning saves `state_dict()` of every loader that has one in its checkpoints and calls
    `load_state_dict()` before resuming, so training restarted mid-epoch continues with the batches not yet
    seen. The count is taken in the main process, so worker prefetching does not inflate it; Lightning
    itself fetches one batch ahead, so a resumed epoch may skip that one batch.
    """

    def __init__(self, dataset: Any, batch_sampler: DurationBatchSampler, **kwargs: Any):
        super().__init__(dataset, batch_sampler=batch_sampler, **kwargs)
        self._consumed = 0

    def __iter__(self) -> Iterator[Any]:
        self._consumed = self.batch_sampler.resume_offset()
        for batch in super().__iter__():
            self._consumed += 1
            yield batch

    def state_dict(self) -> dict:
        """{"epoch", "batches_consumed", "seed", "num_replicas"} of the current epoch on this rank."""
        return self.batch_sampler.state_dict(self._consumed)

    def load_state_dict(self, state: dict) -> None:
        self.batch_sampler.load_state_dict(state)
