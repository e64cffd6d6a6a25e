"""Sizes and data settings shared by the ONNX export tests (a module of its own so test files import it by name)."""

from __future__ import annotations

from pathlib import Path

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
# the evaluation tests' micro model (tests/evaluation/test_evaluation_recipe.py) on 80 log-mel bins
MICRO = dict(input_dim=80, d_model=32, num_layers=1, num_heads=2, ffn_dim=64, conv_kernel_size=3,
             predictor_embed_dim=16, predictor_dim=32, joint_dim=32)
TINY_DATA = ["data.mini_corpus.n_train=24", "data.mini_corpus.n_dev=8", "data.mini_corpus.n_test=8",
             "data.vocab_size=48", "data.num_workers=0", "data.prepare_num_workers=0", "data.max_duration=10"]


def overfit_micro_model(datamodule, steps: int, seed: int = 0):
    """The micro model trained (Adam, full batch, no dropout) on the data module's training utterances until it
    knows them by heart; returns (model in eval mode, their float waveforms, their reference texts)."""
    import torch

    from asr_plugin.data import load_audio, read_manifest
    from asr_plugin.losses import TransducerLoss
    from asr_plugin.models import build_transducer

    entries = [e for split in datamodule.train_splits for e in read_manifest(datamodule.split_manifest(split))]
    waveforms = [load_audio(e.path) for e in entries]
    audio = torch.nn.utils.rnn.pad_sequence(waveforms, batch_first=True)  # (B, S)
    features, lengths = datamodule.frontend(audio, torch.tensor([len(w) for w in waveforms]))
    tokens = [torch.tensor(datamodule.tokenizer.encode(e.text)) for e in entries]
    targets = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True)  # (B, U)
    target_lengths = torch.tensor([len(t) for t in tokens])
    torch.manual_seed(seed)
    model = build_transducer(vocab_size=datamodule.tokenizer.vocab_size, **MICRO, dropout=0.0, predictor_dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = TransducerLoss(mode="batched")
    for _ in range(steps):
        optimizer.zero_grad()
        model(features, lengths, targets, target_lengths, loss_fn).backward()
        optimizer.step()
    return model.eval(), [w.numpy() for w in waveforms], [e.text for e in entries]
