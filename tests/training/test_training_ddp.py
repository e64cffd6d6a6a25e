"""DDP on 2 CPU processes (gloo) with the sample-wise loss gives the gradients of one process; batches of
different sizes on the ranks weigh every utterance alike (loss normalised by the global batch)."""

from __future__ import annotations

import pytest
import torch
from train_configs import micro_module_kwargs, quiet_cpu_trainer
from training_synthetic import (
    CloseProcessGroup,
    RankBatchesDataModule,
    SaveGradients,
    SyntheticDataModule,
    SyntheticUtterances,
    collate,
)

from asr_plugin.training import TransducerModule

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]  # subprocess launches of training runs


def _first_step_gradients(path, datamodule: SyntheticDataModule, **trainer_kwargs) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    module = TransducerModule(**micro_module_kwargs("samplewise"))
    trainer = quiet_cpu_trainer(
        max_steps=1,
        limit_val_batches=0,
        callbacks=[SaveGradients(path), CloseProcessGroup()],
        use_distributed_sampler=False,
        **trainer_kwargs,
    )
    trainer.fit(module, datamodule=datamodule)
    return torch.load(path)


def test_ddp_two_cpu_processes_match_one_process_with_gradient_accumulation(tmp_path):
    # DDP: rank r gets utterances r::2 of 4, i.e. batches [0, 2] and [1, 3]; it averages the two batch means.
    ddp = _first_step_gradients(
        tmp_path / "ddp.pt", SyntheticDataModule(n=4, batch_size=2, equal_lengths=True), devices=2, strategy="ddp_spawn"
    )
    # One process sees the same two batches and accumulates them (Lightning scales each loss by 1/2).
    # The batches must match exactly: the Conformer's BatchNorm makes a batch's gradient depend on its
    # members, and its convolutions see padding (hence equal lengths).
    single = _first_step_gradients(
        tmp_path / "single.pt",
        SyntheticDataModule(n=4, batch_size=2, equal_lengths=True, order=[0, 2, 1, 3]),
        devices=1,
        accumulate_grad_batches=2,
    )
    assert single.keys() == ddp.keys()
    assert len(single) == len(list(TransducerModule(**micro_module_kwargs()).parameters()))
    # float32 sums in another order: differences of a few 1e-6 where the largest gradients are ~0.3 (and
    # the biases in front of BatchNorm have gradients of ~0, so the tolerance is global)
    atol = 1e-4 * max(float(grad.abs().max()) for grad in single.values())
    for name, grad in single.items():
        torch.testing.assert_close(ddp[name], grad, rtol=1e-3, atol=atol, msg=lambda m: f"{name}: {m}")


def test_ddp_ranks_with_unequal_batches_give_the_gradient_of_the_mean_over_all_utterances(tmp_path):
    # rank 0 trains on 3 utterances, rank 1 on 1 in the same step
    batches = [[0, 1, 2], [3]]
    ddp = _first_step_gradients(tmp_path / "ddp.pt", RankBatchesDataModule(batches), devices=2, strategy="ddp_spawn")

    # reference: the same module, each batch through its own forward (BatchNorm statistics per batch, as on
    # the ranks); the update must be d/dθ (sum of the 4 losses) / 4 = 3/4 grad(mean A) + 1/4 grad(mean B)
    torch.manual_seed(0)
    module = TransducerModule(**micro_module_kwargs("samplewise")).train()
    data = SyntheticUtterances(8, equal_lengths=True)
    per_batch = []  # {name: gradient of the batch's mean loss}
    for indices in batches:
        module.zero_grad()
        batch = collate([data[i] for i in indices])
        module.compute_loss(batch, batch.features)[0].backward()
        per_batch.append({name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None})
    reference = {name: 0.75 * per_batch[0][name] + 0.25 * per_batch[1][name] for name in per_batch[0]}
    per_rank_mean = {name: 0.5 * per_batch[0][name] + 0.5 * per_batch[1][name] for name in per_batch[0]}
    assert reference.keys() == ddp.keys()
    atol = 1e-4 * max(float(grad.abs().max()) for grad in reference.values())
    for name, grad in reference.items():
        torch.testing.assert_close(ddp[name], grad, rtol=1e-3, atol=atol, msg=lambda m: f"{name}: {m}")
    # what DDP gave before (each rank's mean weighs 1/2) is clearly different
    name = "model.joint.output.weight"
    assert (ddp[name] - per_rank_mean[name]).abs().max() > 100 * atol
