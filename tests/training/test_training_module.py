"""TransducerModule on synthetic batches: loss modes, overfitting, optimizer groups, precision."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from train_configs import micro_module_kwargs, quiet_cpu_trainer
from training_synthetic import SyntheticDataModule, SyntheticUtterances, collate

from asr_plugin.training import TransducerModule


def test_batched_and_samplewise_give_the_same_loss_and_gradients():
    torch.manual_seed(0)
    batched = TransducerModule(**micro_module_kwargs("batched"))
    samplewise = TransducerModule(**micro_module_kwargs("samplewise"))
    samplewise.load_state_dict(batched.state_dict())
    batch = collate([SyntheticUtterances(4, seed=3)[i] for i in range(4)])
    assert len(set(batch.feature_lengths.tolist())) > 1, "padding must be exercised"

    losses, grads = [], []
    for module in (batched, samplewise):
        module.train()
        loss, _, _ = module.compute_loss(batch, batch.features)
        loss.backward()
        losses.append(loss.detach())
        grads.append({name: p.grad for name, p in module.named_parameters()})

    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-5)
    assert all(g is not None for g in grads[0].values()), "every parameter must receive a gradient"
    # biases in front of BatchNorm have a true gradient of 0 (BN removes the mean): float32 noise of ~1e-6
    # there, so the absolute tolerance follows the largest gradient
    atol = 1e-5 * max(float(grad.abs().max()) for grad in grads[0].values())
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-4, atol=atol, msg=lambda m: f"{name}: {m}")


class _RecordLoss(L.Callback):
    def __init__(self):
        self.losses = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))


def test_overfits_a_handful_of_utterances():
    torch.manual_seed(0)
    kwargs = micro_module_kwargs("samplewise", lr=1e-2)
    kwargs["optim"]["scheduler"]["warmup_steps"] = 10
    module = TransducerModule(**kwargs)
    record = _RecordLoss()
    trainer = quiet_cpu_trainer(max_steps=60, callbacks=[record], limit_val_batches=0)
    trainer.fit(module, datamodule=SyntheticDataModule(n=4, batch_size=4))
    first, last = record.losses[0], sum(record.losses[-5:]) / 5
    assert last < 0.2 * first, f"loss went from {first:.3f} to {last:.3f}"


class _FitWithFinetuneGroups(L.Callback):
    def on_train_start(self, trainer, pl_module):
        self.groups = [
            {"name": g["name"], "lr": g["initial_lr"], "params": {id(p) for p in g["params"]}}
            for g in trainer.optimizers[0].param_groups
        ]


def test_pretrained_parameters_get_their_own_lr_and_frozen_ones_none():
    module = TransducerModule(**micro_module_kwargs(lr=1e-3), pretrained_lr=1e-4)
    encoder = {f"encoder.{n}" for n, _ in module.model.encoder.named_parameters()}
    module.mark_pretrained(encoder)
    frozen = module.model.encoder.subsampling.out.weight
    frozen.requires_grad_(False)
    hook = _FitWithFinetuneGroups()
    quiet_cpu_trainer(max_steps=1, limit_val_batches=0, callbacks=[hook]).fit(
        module, datamodule=SyntheticDataModule(n=2, batch_size=2)
    )

    groups = {g["name"]: g for g in hook.groups}
    assert groups["new"]["lr"] == 1e-3 and groups["pretrained"]["lr"] == 1e-4
    params = dict(module.model.named_parameters())
    assert groups["pretrained"]["params"] == {id(params[n]) for n in encoder} - {id(frozen)}
    assert groups["new"]["params"] == {id(p) for n, p in params.items() if n not in encoder}
    with pytest.raises(ValueError, match="not in the model"):
        module.mark_pretrained({"encoder.nope"})


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_fast_dev_run_logs_loss_and_wer(precision):
    torch.manual_seed(0)
    module = TransducerModule(**micro_module_kwargs("samplewise"))
    trainer = quiet_cpu_trainer(fast_dev_run=2, precision=precision)
    trainer.fit(module, datamodule=SyntheticDataModule(n=4, batch_size=2))
    metrics = trainer.callback_metrics
    for key in ("train/loss_step", "train/loss_epoch", "train/grad_norm", "val/loss", "val/wer"):
        assert key in metrics and torch.isfinite(metrics[key]), key
    assert float(metrics["val/wer"]) >= 0.0  # an untrained model inserts: WER may exceed 1
    assert "train/peak_memory_mib" not in metrics  # measured on CUDA only
    assert trainer.global_step == 2


def test_wer_needs_a_tokenizer():
    module = TransducerModule(**micro_module_kwargs())
    with pytest.raises(ValueError, match="tokenizer"):
        module._tokenizer()


class _GradientNorms(L.Callback):
    """Global gradient norm before clipping (on_before_optimizer_step) and after it (at the batch's end: the
    gradients are zeroed at the start of the next step)."""

    def __init__(self):
        self.before, self.after = [], []

    @staticmethod
    def _norm(module):
        return float(
            torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in module.parameters() if p.grad is not None]))
        )

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.before.append(self._norm(pl_module))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.logged = float(trainer.callback_metrics["train/grad_norm"])
        self.after.append(self._norm(pl_module))


@pytest.mark.parametrize(("clip", "algorithm"), [(0.01, "norm"), (None, None), (1e-4, "value")])
def test_logged_grad_norm_is_the_norm_before_clipping_and_clipping_still_applies(clip, algorithm):
    torch.manual_seed(0)
    module = TransducerModule(**micro_module_kwargs())
    norms = _GradientNorms()
    trainer = quiet_cpu_trainer(
        max_steps=1, limit_val_batches=0, callbacks=[norms], gradient_clip_val=clip, gradient_clip_algorithm=algorithm
    )
    trainer.fit(module, datamodule=SyntheticDataModule(n=4, batch_size=4))
    assert norms.logged == pytest.approx(norms.before[0], rel=1e-5)
    if algorithm == "norm":
        assert norms.before[0] > 10 * clip and norms.after[0] == pytest.approx(clip, rel=1e-4)
    elif algorithm == "value":
        assert max(float(p.grad.abs().max()) for p in module.parameters() if p.grad is not None) <= clip
    else:
        assert norms.after[0] == pytest.approx(norms.before[0], rel=1e-6)
