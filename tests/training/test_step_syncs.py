"""Host syncs and collectives per training step, counted on the CPU with the loss's machinery
(``benchmarks.host_syncs``, as ``scripts/benchmark_loss.py --count-ops``).

Per step (forward, loss, backward, clipping, optimizer step; micro model, B=4, auxiliary CTC), counted
2026-12-01 on this 2-core CPU machine: before, 10 sync-type calls (batched) / 12 (sample-wise), among them
the model's ``int(target_lengths.max())`` and the learning rate logged as a Python float (a host-to-device
copy), and under DDP (2 gloo processes) 2 barriers and 2 all-reduces (Lightning's ``strategy.reduce`` for the
loss normalisation, the step loss's ``sync_dist``). Now 8 / 10: what the loss's own checks and the encoder's
length checks need; under DDP 1 all-reduce (the utterance count) and no barrier.
"""

from __future__ import annotations

import pytest
import torch
from train_configs import micro_module_kwargs, quiet_cpu_trainer
from training_synthetic import CloseProcessGroup, CountStepSyncs, SyntheticDataModule

from asr_plugin.training import TransducerModule

# The loss (validation and planning: the lengths' and targets' host copies and their checks, the non-finite
# check; sample-wise: the plan order's upload and the backward's uniform-upstream check) and the encoder's
# one read of the shortest and longest length (models/encoder.py: too-short check and trim) hold all of them;
# the training module adds none.
SYNCS_PER_STEP = {"batched": 7, "samplewise": 9}


def _count(mode: str, batch_size: int, steps: int = 3, **trainer_kwargs) -> CountStepSyncs:
    torch.manual_seed(0)
    module = TransducerModule(**{**micro_module_kwargs(mode), "ctc_weight": 0.3})
    counter = CountStepSyncs(trainer_kwargs.pop("path", None))
    trainer = quiet_cpu_trainer(
        max_steps=steps + 1,
        limit_val_batches=0,
        gradient_clip_val=5.0,
        use_distributed_sampler=False,
        callbacks=[counter, CloseProcessGroup()],
        **trainer_kwargs,
    )
    trainer.fit(module, datamodule=SyntheticDataModule(n=64, batch_size=batch_size, equal_lengths=True))
    return counter


@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_host_syncs_per_training_step_are_few_and_constant_in_the_batch(mode):
    for batch_size in (4, 8):
        steps = _count(mode, batch_size).steps
        assert len(steps) == 3 and all(step == steps[0] for step in steps), steps
        assert sum(steps[0].values()) == SYNCS_PER_STEP[mode], steps[0]


@pytest.mark.slow
def test_a_ddp_step_has_one_all_reduce_and_no_barrier(tmp_path):
    _count("batched", 4, devices=2, strategy="ddp_spawn", path=tmp_path / "counts.pt")
    counts = torch.load(tmp_path / "counts.pt")
    assert counts["barrier"] == [0, 0, 0] and counts["all_reduce"] == [1, 1, 1], counts
    assert all(sum(step.values()) == SYNCS_PER_STEP["batched"] for step in counts["syncs"]), counts["syncs"]
