"""Tiny model files for the streaming benchmark's --quick mode and the streaming entry points' tests: training
checkpoints of a cache-aware streaming model (NeMo's FastConformer layout, random weights, lookaheads of 3, 1 and 0
frames and full context, as experiment=mini_streaming) and of a full-context one, with a SentencePiece tokenizer and
a front-end record, and speech-like audio."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from asr_plugin.formats.checkpoint import write_checkpoint
from asr_plugin.models import Transducer, build_transducer
from asr_plugin.text import Tokenizer, train_tokenizer
from benchmarks.nemo_examples import SENTENCES

BINS = 16
ONLINE = {"kind": "sherpa_online", "options": {"num_mel_bins": BINS}}
CONTEXTS = [[8, 3], [8, 1], [8, 0], [-1, -1]]  # experiment=mini_streaming's kind of model: three lookaheads, full
# NeMo's FastConformer streaming layout at the tests' tiny size: causal 8x dw_striding subsampling, a causal kernel-5
# convolution with LayerNorm (the attention contexts and their style are a model's own)
STREAMING_ENCODER = dict(
    d_model=16,
    num_layers=2,
    num_heads=2,
    ffn_dim=32,
    conv_kernel_size=5,
    dropout=0.0,
    attention="rel_pos",
    subsampling="dw_striding",
    subsampling_channels=8,
    subsampling_factor=8,
    xscaling=True,
    conv_context_size="causal",
    conv_norm_type="layer_norm",
    causal_downsampling=True,
)
STREAMING = dict(
    input_dim=BINS,
    **STREAMING_ENCODER,
    att_context_size=CONTEXTS,
    att_context_style="chunked_limited",
    predictor_embed_dim=8,
    predictor_dim=12,
    joint_dim=10,
)
FULL_CONTEXT = {
    key: value
    for key, value in STREAMING.items()
    if key
    not in ("att_context_size", "att_context_style", "conv_context_size", "conv_norm_type", "causal_downsampling")
}
SAMPLE_RATE = 16000


def small_tokenizer(directory: Path) -> Tokenizer:
    """A 36-piece SentencePiece tokenizer trained on a few sentences."""
    return train_tokenizer([s.upper() for s in SENTENCES] * 4, directory / "tiny.model", vocab_size=36)


def save_model_checkpoint(
    path: Path,
    tokenizer: Tokenizer,
    architecture: dict,
    frontend: dict = ONLINE,
    seed: int = 0,
    blank_bias: float = 2.0,
) -> Transducer:
    """A training checkpoint (content hash, records) of a randomly initialised model of `architecture`, its encoder
    and joint scaled so that greedy search emits varied tokens that depend on the audio and the context (not one
    token at its cap on every frame); `blank_bias` is added to the blank's score. Returns the model."""
    torch.manual_seed(seed)
    node = {"_target_": "asr_plugin.models.build_transducer", "vocab_size": tokenizer.vocab_size, **architecture}
    model = build_transducer(**{key: value for key, value in node.items() if key != "_target_"})
    with torch.no_grad():
        for param in model.encoder.parameters():
            param.add_(0.3 * torch.randn_like(param))
        model.joint.encoder_proj.weight.mul_(4.0)
        model.joint.output.weight.mul_(2.0)
        model.joint.output.bias[0] += blank_bias
    checkpoint = {
        "state_dict": {f"model.{key}": value for key, value in model.state_dict().items()},
        "epoch": 0,
        "global_step": 1,
        "hyper_parameters": {"model": node},
        "asr_plugin": {"tokenizer": tokenizer.record(), "frontend": frontend},
    }
    write_checkpoint(checkpoint, path)
    return model.eval()


def speechlike_audio(seconds: float, seed: int, pause: tuple[float, float] | None = None) -> np.ndarray:
    """(N,) float32 noise bursts of 0.1-0.4 s between short pauses, in [-1, 1]; `pause` = (start, end) seconds of
    digital silence."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    envelope = np.repeat(rng.uniform(0, 1, n // 1600 + 1) > 0.35, 1600)[:n]
    audio = (rng.normal(0, 0.2, n) * envelope).clip(-1, 1).astype(np.float32)
    if pause is not None:
        audio[int(pause[0] * SAMPLE_RATE) : int(pause[1] * SAMPLE_RATE)] = 0.0
    return audio


def write_audio(path: Path, audio: np.ndarray) -> Path:
    sf.write(path, audio, SAMPLE_RATE, subtype="FLOAT")
    return path
