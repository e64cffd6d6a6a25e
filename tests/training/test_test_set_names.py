"""Each test set's metrics are named after the set, a single one too ("test/<split>/wer", as train.py prints it),
not "test" alone; a set without a name keeps "test" (one) or its dataloader index (several)."""

from __future__ import annotations

from types import SimpleNamespace

from train_configs import micro_module_kwargs

from asr_plugin.training.lightning_module import TransducerModule


def _keys(module, splits, num_sets) -> list[str]:
    module._trainer = SimpleNamespace(num_test_batches=[1] * num_sets, datamodule=SimpleNamespace(test_splits=splits))
    module._evaluate = lambda batch, key: key  # what the step names its metrics after
    return [module.test_step(None, 0, index) for index in range(num_sets)]


def test_test_sets_are_named_after_their_splits_one_set_too():
    module = TransducerModule(**micro_module_kwargs())
    assert _keys(module, ["mine"], 1) == ["test/mine"]
    assert _keys(module, ["a", "b"], 2) == ["test/a", "test/b"]
    assert _keys(module, None, 1) == ["test"]
    assert _keys(module, None, 2) == ["test/0", "test/1"]
