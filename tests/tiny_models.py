"""Tiny models shared by the tests (tests/ is on sys.path: see tests/conftest.py): in Python
(`tiny_transducer`) and as the recipe's Hydra overrides (`MICRO_MODEL`).

A module of its own (not conftest.py) so that test files can import it by a name no other test directory
uses."""

from __future__ import annotations

import torch

from asr_plugin.models import ConformerEncoder, Transducer, build_transducer
from benchmarks.tiny_streaming import STREAMING_ENCODER

TINY_SIZES = dict(
    input_dim=16,
    d_model=16,
    num_layers=1,
    num_heads=2,
    ffn_dim=32,
    conv_kernel_size=3,
    predictor_embed_dim=8,
    predictor_dim=12,
    joint_dim=10,
)


# Smaller than conf/model/tiny.yaml: a few seconds per step on one CPU core. MICRO_MODEL: as overrides of a
# recipe's model node; MICRO_LOGMEL: as build_transducer arguments on 80 log-mel bins.
MICRO_SIZES = dict(
    d_model=32,
    num_layers=1,
    num_heads=2,
    ffn_dim=64,
    conv_kernel_size=3,
    predictor_embed_dim=16,
    predictor_dim=32,
    joint_dim=32,
)
MICRO_MODEL = [f"model.{key}={value}" for key, value in MICRO_SIZES.items()]
MICRO_LOGMEL = dict(input_dim=80, **MICRO_SIZES)
# The mini corpus small enough for a test (`make_mini_librispeech`'s arguments): tests/conftest.py's `tiny_corpus`
# synthesises it once per run; TINY_CORPUS: as the data module's overrides, for a test's evaluation or export.
TINY_CORPUS_SIZES = dict(n_train=24, n_dev=8, n_test=8, seed=0)
TINY_CORPUS = [
    *(f"data.mini_corpus.{key}={value}" for key, value in TINY_CORPUS_SIZES.items()),
    "data.vocab_size=48",
    "data.num_workers=0",
    "data.prepare_num_workers=0",
    "data.max_duration=10",
]


def tiny_transducer(vocab_size: int = 7, seed: int = 0, **overrides) -> Transducer:
    """A randomly initialised small transducer in eval mode."""
    torch.manual_seed(seed)
    model = build_transducer(vocab_size, **{**TINY_SIZES, **overrides})
    # A sharper joint than the default init, so searches emit tokens instead of only blanks.
    with torch.no_grad():
        model.joint.output.weight.mul_(4.0)
        model.joint.output.bias[model.blank_id] -= 1.0
    return model.eval()


class CharTokenizer:
    """Token id k (k >= 1) <-> letter 'a' + k - 1, enough for the text plumbing."""

    blank_id = 0

    def __init__(self, vocab_size: int = 7) -> None:
        self.vocab_size = vocab_size

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(ord("a") + i - 1) for i in ids)

    def encode(self, text: str) -> list[int]:
        return [ord(c) - ord("a") + 1 for c in text]


def random_encoder_out(model: Transducer, batch: int, frames: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, H_e) random frames and (B,) lengths with the first utterance full-length."""
    generator = torch.Generator().manual_seed(seed)
    encoder_out = torch.randn(batch, frames, model.encoder.output_dim, generator=generator)
    lengths = torch.randint(1, frames + 1, (batch,), generator=generator)
    lengths[0] = frames
    return encoder_out, lengths


STREAMING_FEATURES = 20  # feature bins of `streaming_encoder`


def streaming_encoder(style="chunked_limited", contexts=((4, 0), (4, 1), (4, 3)), **options) -> ConformerEncoder:
    """A tiny cache-aware streaming encoder (NeMo's FastConformer layout: causal 8x dw_striding subsampling, a causal
    kernel-5 convolution with LayerNorm, the `contexts` of `style`; `options` override) in eval mode, with random
    weights, biases, norm scales and BatchNorm statistics."""
    torch.manual_seed(0)
    settings = dict(
        input_dim=STREAMING_FEATURES,
        **STREAMING_ENCODER,
        att_context_size=[list(context) for context in contexts],
        att_context_style=style,
    )
    encoder = ConformerEncoder(**{**settings, **options})
    with torch.no_grad():
        for param in encoder.parameters():
            param.add_(0.1 * torch.randn_like(param))
        for module in encoder.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.normal_()
                module.running_var.uniform_(0.5, 2.0)
    return encoder.eval()
