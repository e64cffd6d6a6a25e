"""NeMo 3.0's own transducer decoding of encoder outputs, the side of NeMo in the comparisons with ours
(`benchmarks.decoding`, tests/decoding): a restored model's decoding config as saved, changed to one strategy
(``greedy_batch``, label looping; ``malsd_batch``, batched beam search) with the cap on tokens per frame ours
uses, NeMo's hypotheses of a batch, and a sharpened random example model for a lattice without a NeMo-trained
reference (needs NeMo)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch


def nemo_encode(nemo, audio: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """NeMo's preprocessor and encoder on (B, S) audio and (B,) sample counts: (B, D, T) frames, (B,) lengths."""
    features, feature_lengths = nemo.preprocessor(input_signal=audio, length=lengths)
    return nemo.encoder(audio_signal=features, length=feature_lengths)


def set_strategy(nemo, saved: dict[str, Any], strategy: str, max_symbols: int, beam: int = 4, **options) -> None:
    """Sets NeMo's decoding to `strategy` from its `saved` config (``nemo.cfg.decoding`` as restored, a dict:
    ``change_decoding_strategy`` rewrites ``nemo.cfg.decoding``): greedy's ``max_symbols`` (its
    ``max_symbols_per_step`` in older configs) and beam search's ``max_symbols_per_step`` = `max_symbols`, beam
    size `beam`, and `options` as dotted keys (``"beam.score_norm": False``, ``"compute_timestamps": True``)."""
    from omegaconf import OmegaConf, open_dict

    config = OmegaConf.create(saved)
    with open_dict(config):
        config.strategy = strategy
        cap = "max_symbols" if "max_symbols" in config.greedy else "max_symbols_per_step"  # the config's own key
        config.greedy[cap] = max_symbols
        config.beam = {**config.get("beam", {}), "beam_size": beam, "max_symbols_per_step": max_symbols}
        for key, value in options.items():
            OmegaConf.update(config, key, value, force_add=True)
    nemo.change_decoding_strategy(config, verbose=False)


@torch.no_grad()
def nemo_hypotheses(nemo, encoded: torch.Tensor, lengths: torch.Tensor) -> list:
    """NeMo's best hypothesis per utterance of (B, D, T) encoder frames with the strategy set (`set_strategy`)."""
    hyps = nemo.decoding.rnnt_decoder_predictions_tensor(encoded, lengths, return_hypotheses=True)
    hyps = hyps[0] if isinstance(hyps, tuple) else hyps
    return [h[0] if isinstance(h, list) else h for h in hyps]


def save_sharpened_example(name: str, out_dir: str | os.PathLike) -> Path:
    """NeMo's example model `name` (`benchmarks.nemo_examples`: random weights) with its joint's output weights
    times `SHARPEN`, so that it emits tokens, saved by NeMo as ``<out_dir>/<name>.nemo``: a model of a lattice no
    NeMo-trained reference has (TDT), for speed only (its WER means nothing)."""
    import tempfile

    from benchmarks.nemo_compare import SHARPEN
    from benchmarks.nemo_examples import build_example_model, save_nemo_atomic, train_nemo_style_tokenizer

    path = Path(out_dir) / f"{name}.nemo"
    if path.exists():
        raise FileExistsError(f"{path} exists; choose another directory")
    with tempfile.TemporaryDirectory() as tmp:
        model = build_example_model(name, train_nemo_style_tokenizer(Path(tmp) / "tokenizer"))
        with torch.no_grad():
            model.joint.joint_net[-1].weight.mul_(SHARPEN)
        return save_nemo_atomic(model, path)
