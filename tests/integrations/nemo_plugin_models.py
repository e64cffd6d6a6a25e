"""Shrunk NeMo RNN-T models built by NeMo, batches and one training step, for the NeMo plugin's tests."""

from __future__ import annotations

from pathlib import Path

import torch

from asr_plugin.integrations.nemo.example_configs import SAMPLE_RATE, transducer_config

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a transducer emits one token or a blank at every frame",
    "she sells sea shells by the sea shore",
    "pack my box with five dozen liquor jugs",
]
# Shrunk sizes of both architectures (FastConformer's subsampling convolutions narrowed from 256 channels).
SIZES = dict(d_model=32, n_layers=2, n_heads=4, hidden=24, subsampling_conv_channels=16)
BATCH_SECONDS = [1.6, 1.3, 1.1, 0.8]
BATCH_TOKENS = [9, 6, 7, 3]


def train_tokenizer(directory: Path, vocab_size: int = 40) -> Path:
    """A SentencePiece BPE model as NeMo's tokenizer script trains one (<unk> = 0, no bos/eos)."""
    import sentencepiece as spm

    directory.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES), model_prefix=str(directory / "tokenizer"), vocab_size=vocab_size,
        model_type="bpe", character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, minloglevel=2,
    )
    vocab = [line.split("\t")[0] for line in (directory / "tokenizer.vocab").read_text().splitlines()]
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return directory


def shrunk_config(architecture: str, tokenizer_dir: Path, **changes) -> dict:
    """NeMo's example config of `architecture`, shrunk (`changes`: transducer_config's arguments)."""
    return transducer_config(architecture, tokenizer_dir=tokenizer_dir, **{**SIZES, **changes})


def attach_trainer(model, lr: float = 1e-3):
    """`model` with a minimal Lightning trainer (training_step logs through it) and an AdamW optimizer."""
    import lightning.pytorch as pl
    from omegaconf import OmegaConf

    trainer = pl.Trainer(accelerator="cpu", barebones=True, max_steps=1)
    trainer.log_every_n_steps = 1  # barebones sets 0, which NeMo's training step takes a modulo by
    model.set_trainer(trainer)
    model.setup_optimization(OmegaConf.create({"name": "adamw", "lr": lr, "weight_decay": 0.0}))
    return model


def build_model(config: dict, seed: int = 0, lr: float = 1e-3):
    """NeMo's EncDecRNNTBPEModel from `config`, weights drawn with `seed`, ready for training_step."""
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf

    torch.manual_seed(seed)
    return attach_trainer(EncDecRNNTBPEModel(cfg=OmegaConf.create(config)), lr)


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
        assert error <= 1e-4 * expected.norm() + 1e-6 * largest, f"{name}: |diff| {error:.3g}, |grad| {expected.norm():.3g}"
