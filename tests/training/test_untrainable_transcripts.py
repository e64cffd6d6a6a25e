"""Before fitting or validating, the module tells the data module how many tokens it can emit from so many feature
frames (its encoder frames times its greedy cap per frame), so that transcripts with more tokens than that are left
out (`TransducerDataModule.drop_untrainable`)."""

from __future__ import annotations

import lightning as L
import torch
from train_configs import micro_module_kwargs
from training_synthetic import SyntheticDataModule

from asr_plugin.training import TransducerModule


class RecordingDataModule(SyntheticDataModule):
    def __init__(self) -> None:
        super().__init__(n=4)
        self.calls: list[torch.Tensor] = []

    def drop_untrainable(self, max_tokens) -> None:
        self.calls.append(max_tokens(torch.tensor([100, 7])))


def test_fit_and_validate_give_the_data_module_the_tokens_the_model_can_emit():
    module = TransducerModule(**micro_module_kwargs("batched"), max_symbols_per_frame=3)
    datamodule = RecordingDataModule()
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=1,
    )
    trainer.validate(module, datamodule=datamodule)
    trainer.fit(module, datamodule=datamodule)
    expected = 3 * module.model.encoder.output_lengths(torch.tensor([100, 7]))
    assert len(datamodule.calls) == 2
    for frames in datamodule.calls:
        torch.testing.assert_close(frames, expected)
