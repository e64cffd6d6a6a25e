"""Before fitting or validating, the module hands the data module its encoder's frame count, so that transcripts with
more tokens than the encoder has frames are left out (`TransducerDataModule.drop_untrainable`)."""

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

    def drop_untrainable(self, encoder_frames) -> None:
        self.calls.append(encoder_frames(torch.tensor([100, 7])))


def test_fit_and_validate_give_the_data_module_the_encoders_frame_count():
    module = TransducerModule(**micro_module_kwargs("batched"))
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
    expected = module.model.encoder.output_lengths(torch.tensor([100, 7]))
    assert len(datamodule.calls) == 2
    for frames in datamodule.calls:
        torch.testing.assert_close(frames, expected)
