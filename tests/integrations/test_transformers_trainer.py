"""transformers' Trainer fine-tuning a Parakeet transducer with use_samplewise: the same steps as with
transformers' own loss (gradient accumulation, gradient checkpointing of the encoder), and bf16 autocast."""

from __future__ import annotations

import functools

import pytest
import torch

pytest.importorskip("transformers.models.parakeet")
pytest.importorskip("accelerate")  # the Trainer's

from transformers import Trainer, TrainingArguments  # noqa: E402
from transformers_models import KINDS, build_model, collate, examples  # noqa: E402

from asr_plugin.integrations.transformers import use_samplewise  # noqa: E402

STEPS = 3


def fine_tune(kind: str, samplewise: bool, output_dir, **arguments) -> tuple[torch.nn.Module, list[float], set]:
    """`STEPS` optimizer steps of 2 accumulated batches of 2 ragged utterances (SGD: the parameters move by the
    gradients themselves); (the model, the logged training losses, the dtypes the joint's inputs came in)."""
    model = build_model(kind).train()
    dtypes = set()
    model.encoder_projector.register_forward_hook(lambda module, args, out: dtypes.add(out.dtype))
    if samplewise:
        use_samplewise(model, memory_budget="4KiB")
    args = TrainingArguments(
        output_dir=str(output_dir),
        max_steps=STEPS,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        learning_rate=0.05,
        optim="sgd",
        lr_scheduler_type="constant",
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **arguments,
    )
    data = examples(kind)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=functools.partial(collate, kind=kind))
    trainer.train()
    return model, [entry["loss"] for entry in trainer.state.log_history if "loss" in entry], dtypes


@pytest.mark.parametrize("kind", KINDS)
def test_trainer_takes_the_same_steps(kind, tmp_path):
    """Sample-wise with the encoder's gradient checkpointing against transformers' own loss without it."""
    expected, expected_losses, _ = fine_tune(kind, False, tmp_path / "own")
    model, losses, _ = fine_tune(kind, True, tmp_path / "samplewise", activation_checkpointing=True)
    assert len(losses) == STEPS and model.encoder.layers[0].gradient_checkpointing
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected_losses), rtol=1e-5, atol=0.0)
    for (name, parameter), reference in zip(model.named_parameters(), expected.parameters()):
        torch.testing.assert_close(parameter, reference, rtol=1e-5, atol=1e-6, msg=name)
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), build_model(kind).parameters()))


def test_trainer_with_bf16_autocast(tmp_path):
    _, expected, _ = fine_tune("tdt", False, tmp_path / "own", bf16=True)
    _, losses, dtypes = fine_tune("tdt", True, tmp_path / "samplewise", bf16=True)
    assert dtypes == {torch.bfloat16}  # the Trainer's autocast reached the model
    assert len(losses) == STEPS and all(torch.isfinite(torch.tensor(losses)))
    # bf16 rounds the joint's scores (8 bits of mantissa) in both, in another order
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), rtol=2e-2, atol=0.0)
