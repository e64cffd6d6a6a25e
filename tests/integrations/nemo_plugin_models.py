"""Shrunk NeMo RNN-T models built by NeMo (``benchmarks.nemo_examples``), batches and one training step,
for the NeMo plugin's tests."""

from __future__ import annotations

from pathlib import Path

import torch

from benchmarks.nemo_examples import nemo_config

ARCHITECTURES = ["conformer_transducer", "fast_conformer_transducer"]
SAMPLE_RATE = 16000
BATCH_SECONDS = [1.6, 1.3, 1.1, 0.8]
BATCH_TOKENS = [9, 6, 7, 3]
# (section path, key) of every dropout of the example configs
DROPOUTS = (
    (("encoder",), "dropout"),
    (("encoder",), "dropout_pre_encoder"),
    (("encoder",), "dropout_att"),
    (("decoder", "prednet"), "dropout"),
    (("joint", "jointnet"), "dropout"),
)


def shrunk_config(architecture: str, tokenizer_dir: Path, dropout: float = 0.0, activation: str = "relu") -> dict:
    """NeMo's shrunk example config of `architecture` with every dropout `dropout`, SpecAugment and dither off
    (random in training), the joint's `activation` and the validation loss computed."""
    config = nemo_config(architecture, tokenizer_dir)
    for path, key in DROPOUTS:
        section = config
        for name in path:
            section = section[name]
        section[key] = dropout
    config["spec_augment"] = None
    config["preprocessor"]["dither"] = 0.0
    config["joint"]["jointnet"]["activation"] = activation
    config["compute_eval_loss"] = True
    return config


def attach_trainer(model, lr: float = 1e-3):
    """`model` with a minimal Lightning trainer (training_step logs through it) and an AdamW optimizer."""
    import lightning.pytorch as pl
    from omegaconf import OmegaConf

    trainer = pl.Trainer(accelerator="cpu", barebones=True, max_steps=1)
    trainer.log_every_n_steps = 1  # barebones sets 0, which NeMo's training step takes a modulo by
    model.set_trainer(trainer)
    model.setup_optimization(OmegaConf.create({"name": "adamw", "lr": lr, "weight_decay": 0.0}))
    return model


def build_model(config: dict, seed: int = 0, lr: float = 1e-3, model_class=None):
    """NeMo's `model_class` (default EncDecRNNTBPEModel) from `config`, weights drawn with `seed`, ready for
    training_step."""
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf

    torch.manual_seed(seed)
    return attach_trainer((model_class or EncDecRNNTBPEModel)(cfg=OmegaConf.create(config)), lr)


def make_batch(vocab_size: int, seconds=BATCH_SECONDS, tokens=BATCH_TOKENS, seed: int = 1) -> tuple:
    """(audio (B, S), audio lengths (B,), transcripts (B, U), transcript lengths (B,)) as NeMo's data loaders give
    them: random audio, random non-blank token ids in [0, vocab_size)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([int(s * SAMPLE_RATE) for s in seconds])
    audio = 0.1 * torch.randn(len(seconds), int(lengths.max()), generator=generator)
    for row, length in enumerate(lengths.tolist()):
        audio[row, length:] = 0.0
    transcripts = torch.randint(0, vocab_size, (len(tokens), max(tokens)), generator=generator)
    return audio, lengths, transcripts, torch.tensor(tokens)


def training_step(model, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """NeMo's own training_step and backward: (loss, gradient of every parameter that has one)."""
    model.train()
    model.zero_grad(set_to_none=True)
    loss = model.training_step(batch, 0)["loss"]
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_same_step(ours: tuple, theirs: tuple) -> None:
    """Loss to 1e-5 relative; every parameter's gradient to 1e-4 relative (in norm). Gradients that are zero by
    construction (attention key biases, convolution biases before a batch norm) hold only float32 noise, so
    each parameter is also allowed 1e-6 of the largest parameter gradient's norm."""
    (loss, grads), (expected_loss, expected_grads) = ours, theirs
    assert torch.isfinite(expected_loss)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=0.0)
    assert grads.keys() == expected_grads.keys()
    largest = max(g.norm() for g in expected_grads.values())
    for name, expected in expected_grads.items():
        error = (grads[name] - expected).norm()
        assert error <= 1e-4 * expected.norm() + 1e-6 * largest, (
            f"{name}: |diff| {error:.3g}, |grad| {expected.norm():.3g}"
        )
