"""Synthetic data and hooks for the training tests (a module, not a conftest, so ddp_spawn workers can
unpickle these classes by name)."""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Subset

from asr_plugin.data.loading.batch import Batch

VOCAB = 12


class WordTokenizer:
    """Token id i (1..VOCAB-1) <-> word "Wi"."""

    vocab_size = VOCAB

    def decode(self, ids: list[int]) -> str:
        return " ".join(f"W{i}" for i in ids if i)


class SyntheticUtterances(Dataset):
    """`n` fixed random utterances; `equal_lengths` pads nothing (identical results for any batching)."""

    def __init__(self, n: int, seed: int = 0, equal_lengths: bool = False, frames: int = 48, tokens: int = 5):
        generator = torch.Generator().manual_seed(seed)
        self.items = []
        for i in range(n):
            t = frames if equal_lengths else int(torch.randint(frames // 2, frames + 1, (1,), generator=generator))
            u = tokens if equal_lengths else int(torch.randint(2, tokens + 1, (1,), generator=generator))
            targets = torch.randint(1, VOCAB, (u,), generator=generator)
            features = torch.randn(t, 80, generator=generator)
            self.items.append((f"utt{i}", features, targets))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int):
        return self.items[index]


def collate(items) -> Batch:
    ids, features, targets = zip(*items)
    return Batch(
        features=torch.nn.utils.rnn.pad_sequence(list(features), batch_first=True),
        feature_lengths=torch.tensor([f.shape[0] for f in features]),
        targets=torch.nn.utils.rnn.pad_sequence(list(targets), batch_first=True),
        target_lengths=torch.tensor([t.shape[0] for t in targets]),
        ids=list(ids),
        texts=[WordTokenizer().decode(t.tolist()) for t in targets],
    )


class SyntheticDataModule(L.LightningDataModule):
    """Train and validation on the same `n` utterances (enough to overfit and to check plumbing), in
    `order` (a permutation of range(n)) when given."""

    def __init__(self, n: int = 8, batch_size: int = 4, equal_lengths: bool = False, order: list[int] | None = None):
        super().__init__()
        self.dataset = SyntheticUtterances(n, equal_lengths=equal_lengths)
        if order is not None:
            self.dataset = Subset(self.dataset, order)
        self.batch_size = batch_size
        self.tokenizer = WordTokenizer()

    def train_dataloader(self) -> DataLoader:
        # sharded here, like the real data module (the trainers run with use_distributed_sampler=False):
        # rank r gets utterances r, r + world_size, ... in order
        world_size = self.trainer.world_size if self.trainer else 1
        rank = self.trainer.global_rank if self.trainer else 0
        sampler = DistributedSampler(self.dataset, world_size, rank, shuffle=False)
        return DataLoader(self.dataset, batch_size=self.batch_size, sampler=sampler, collate_fn=collate)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.dataset, batch_size=self.batch_size, shuffle=False, collate_fn=collate)


class RankBatchesDataModule(L.LightningDataModule):
    """Rank r trains on the one batch `batches[r]` (lists of utterance indices, of any sizes), as a
    duration-bucketed sampler may hand ranks batches of different sizes in the same step."""

    def __init__(self, batches: list[list[int]], n: int = 8):
        super().__init__()
        self.dataset = SyntheticUtterances(n, equal_lengths=True)
        self.batches = batches
        self.tokenizer = WordTokenizer()

    def train_dataloader(self) -> DataLoader:
        rank = self.trainer.global_rank if self.trainer else 0
        return DataLoader(self.dataset, batch_sampler=[self.batches[rank]], collate_fn=collate)


class SaveGradients(L.Callback):
    """Saves {name: grad} of the first optimizer step (after DDP's all-reduce, before clipping) on rank 0."""

    def __init__(self, path: str | Path):
        self.path = str(path)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if trainer.global_step == 0 and trainer.is_global_zero:
            grads = {name: p.grad.detach().clone() for name, p in pl_module.named_parameters() if p.grad is not None}
            torch.save(grads, self.path)


class CrashAfterSteps(L.Callback):
    """Simulates a killed job: raises after `steps` optimizer steps."""

    def __init__(self, steps: int):
        self.steps = steps

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step >= self.steps:
            raise RuntimeError(f"simulated crash after {self.steps} steps")


class CloseProcessGroup(L.Callback):
    """Ends a spawned DDP run's process group on every rank together (a barrier, then destroy) when fit ends.

    Left to Lightning's exit hook, rank 0 may tear gloo down while rank 1 still destroys its group, and rank 1
    then aborts ("terminate called without an active exception") although training succeeded.
    """

    def on_fit_end(self, trainer, pl_module) -> None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()


class PoisonAfterSteps(L.Callback):
    """Makes the joint's output layer NaN after `steps` optimizer steps: the next loss sees non-finite logits.
    With `snapshot`, first copies the run's metrics.csv there (what is on disk when the run fails)."""

    def __init__(self, steps: int, snapshot: str | None = None):
        self.steps, self.snapshot = steps, snapshot

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step >= self.steps:
            if self.snapshot:
                metrics = Path(trainer.logger.log_dir) / "metrics.csv"
                Path(self.snapshot).write_text(metrics.read_text() if metrics.exists() else "")
            with torch.no_grad():
                pl_module.model.joint.output.weight.fill_(float("nan"))


class CheckpointPayload(L.Callback):
    """Adds `megabytes` of zeros to every checkpoint (`grown_megabytes` from step `grow_at_step` on), so that
    writing one takes a while, and before each write creates ``<marker_dir>/saving-<global step>`` (a test
    kills the process while that write is on)."""

    def __init__(
        self, megabytes: float, marker_dir: str, grow_at_step: int | None = None, grown_megabytes: float = 0.0
    ):
        self.megabytes, self.marker_dir = megabytes, Path(marker_dir)
        self.grow_at_step, self.grown_megabytes = grow_at_step, grown_megabytes

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self.marker_dir.mkdir(parents=True, exist_ok=True)
        (self.marker_dir / f"saving-{trainer.global_step}").touch()
        grown = self.grow_at_step is not None and trainer.global_step >= self.grow_at_step
        checkpoint["payload"] = torch.zeros(int((self.grown_megabytes if grown else self.megabytes) * 2**20) // 4)


class CountStepSyncs(L.Callback):
    """Counts host-sync-type calls (``benchmarks.host_syncs``) and torch.distributed barriers and all-reduces
    inside each training step (batch start to batch end: forward, loss, backward, clipping, optimizer step)
    after the first; rank 0 saves {"syncs": [per step], "barrier": [...], "all_reduce": [...]} to `path`."""

    def __init__(self, path: str | Path | None = None):
        from benchmarks.host_syncs import SyncCounter

        self.path = path
        self.counter_type = SyncCounter
        self.steps: list[dict[str, int]] = []
        self.collectives = {"barrier": [], "all_reduce": []}
        self._counter = None

    def setup(self, trainer, pl_module, stage) -> None:
        # count torch.distributed's Python-level collectives (in this process: ddp_spawn workers run setup)
        for name in self.collectives:
            original = getattr(torch.distributed, name)

            def counted(*args, _original=original, _name=name, **kwargs):
                if self._counter is not None:
                    self.collectives[_name][-1] += 1
                return _original(*args, **kwargs)

            setattr(torch.distributed, name, counted)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step >= 1:
            self._counter = self.counter_type(device_moves=False).__enter__()
            for counts in self.collectives.values():
                counts.append(0)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            self.steps.append(self._counter.syncs)
            self._counter = None
        if self.path is not None and trainer.is_global_zero and trainer.global_step >= trainer.max_steps:
            torch.save({"syncs": self.steps, **self.collectives}, self.path)


class PauseIn(L.Callback):
    """Lets a test signal a run while it is in one stage: when `stage` ("validate" or "test", a Trainer function)
    runs a batch, writes `marker` and makes the batch `seconds` longer."""

    def __init__(self, stage: str, marker: str, seconds: float = 1.0):
        self.stage, self.marker, self.seconds = stage, marker, seconds

    def _pause(self, trainer) -> None:
        if trainer.state.fn == self.stage:
            Path(self.marker).touch()
            time.sleep(self.seconds)

    def on_validation_batch_start(self, trainer, *args) -> None:
        self._pause(trainer)

    def on_test_batch_start(self, trainer, *args) -> None:
        self._pause(trainer)
