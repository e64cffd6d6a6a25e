"""NeMo's own example transducer configs, shrunk, and NeMo models built from them (for comparisons with NeMo).

The configs are the model sections of NeMo 3.0's ``examples/asr/conf/conformer/conformer_transducer_bpe.yaml``
and ``examples/asr/conf/fastconformer/fast-conformer_transducer_bpe.yaml`` with only the sizes shrunk and
the loss/WER fusion turned off; "fast_conformer_tdt" is the FastConformer one turned TDT the way NeMo's TDT
configs (``examples/asr/conf/fastconformer/tdt/``) do it: ``model_defaults.tdt_durations``, the joint's
``num_extra_outputs``, ``decoding.model_type: tdt`` and ``loss_name: tdt`` with ``tdt_kwargs``, written as
NeMo writes them (``${model.model_defaults...}`` interpolations), at sizes no other fixture uses;
"fast_conformer_streaming" is the cache-aware streaming FastConformer of NeMo's
``examples/asr/conf/fastconformer/cache_aware_streaming/fastconformer_transducer_bpe_streaming.yaml`` (causal
``dw_striding`` subsampling, a causal convolution with LayerNorm, ``chunked_limited`` attention as the
multi-lookahead model its comments describe, ``normalize: NA`` features), shrunk to sizes of its own.
`nemo_config` needs no NeMo. `build_example_model` and `save_example_model`
import NeMo (``pip install -e '.[nemo]'``, best in a virtual environment of its own) when called.

The tokenizer is a SentencePiece BPE model trained the way NeMo's ``process_asr_text_tokenizer.py`` does
(lower case, <unk> = 0, no bos/eos), on a few sentences.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from asr_plugin.files import write_atomic

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a transducer emits one token or a blank at every frame",
    "she sells sea shells by the sea shore",
    "pack my box with five dozen liquor jugs",
    "how vexingly quick daft zebras jump",
    "long utterances are where memory runs out",
]

# Encoder overrides of the two example configs' shrunk forms.
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "conformer_transducer": dict(
        subsampling="striding",
        subsampling_factor=4,
        subsampling_conv_channels=-1,
        conv_kernel_size=31,
        d_model=32,
        n_heads=4,
        n_layers=2,
    ),
    "fast_conformer_transducer": dict(
        subsampling="dw_striding",
        subsampling_factor=8,
        subsampling_conv_channels=16,
        conv_kernel_size=9,
        d_model=32,
        n_heads=4,
        n_layers=2,
    ),
    "fast_conformer_tdt": dict(
        subsampling="dw_striding",
        subsampling_factor=8,
        subsampling_conv_channels=24,
        conv_kernel_size=11,
        d_model=40,
        n_heads=5,
        n_layers=3,
        feat_in=96,
    ),
    "fast_conformer_streaming": dict(
        subsampling="dw_striding",
        subsampling_factor=8,
        subsampling_conv_channels=12,
        conv_kernel_size=7,
        d_model=48,
        n_heads=3,
        n_layers=2,
        causal_downsampling=True,
        # NeMo's multi-lookahead layout ([[70, 13], [70, 6], [70, 1], [70, 0]]) shrunk: 1.28 s of left context,
        # lookaheads of 240, 80 and 0 ms; the first is the default
        att_context_size=[[16, 3], [16, 1], [16, 0]],
        att_context_style="chunked_limited",
        conv_context_size="causal",
        conv_norm_type="layer_norm",
    ),
}
# Preprocessor overrides: a streaming model's features are not normalised per utterance (NeMo's "NA")
PREPROCESSORS: dict[str, dict[str, Any]] = {"fast_conformer_streaming": {"normalize": "NA"}}
HIDDEN = 24  # predictor and joint width of the shrunk forms
TDT_HIDDEN = 36  # ... of the TDT one
TDT_DURATIONS = [0, 1, 2, 3, 4]
TDT_SIGMA = 0.05
# full_size=True: the sizes the two example configs are written with (their "Large" rows), 2 LSTM layers as
# the XLarge/Parakeet rows have.
FULL_SIZE = dict(d_model=512, n_heads=8, n_layers=17, hidden=640, pred_rnn_layers=2)


def train_nemo_style_tokenizer(directory: Path, vocab_size: int = 40, sentences: list[str] | None = None) -> Path:
    """A SentencePiece BPE model as NeMo's tokenizer script trains it (<unk> = 0, no bos/eos), in `directory`.

    Writes ``tokenizer.model``, ``tokenizer.vocab`` and ``vocab.txt`` (NeMo's ``tokenizer.dir`` layout) and
    returns `directory`. `sentences` default to `SENTENCES`.
    """
    import sentencepiece as spm

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences or SENTENCES),
        model_prefix=str(directory / "tokenizer"),
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        minloglevel=2,
    )
    vocab = [line.split("\t")[0] for line in (directory / "tokenizer.vocab").read_text().splitlines()]
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return directory


def nemo_config(name: str, tokenizer_dir: str | os.PathLike, full_size: bool = False) -> dict[str, Any]:
    """The model section of NeMo's example config for `name` (a key of `ARCHITECTURES`), shrunk unless `full_size`."""
    if name not in ARCHITECTURES:
        raise ValueError(f"example {name!r}; choose one of {sorted(ARCHITECTURES)}")
    sizes = (
        FULL_SIZE
        if full_size
        else dict(hidden=TDT_HIDDEN if name == "fast_conformer_tdt" else HIDDEN, pred_rnn_layers=1)
    )
    hidden = sizes["hidden"]
    encoder = {
        "_target_": "nemo.collections.asr.modules.ConformerEncoder",
        "feat_in": 80,
        "feat_out": -1,
        "causal_downsampling": False,
        "ff_expansion_factor": 4,
        "self_attention_model": "rel_pos",
        "att_context_size": [-1, -1],
        "att_context_style": "regular",
        "xscaling": True,
        "untie_biases": True,
        "pos_emb_max_len": 5000,
        "conv_norm_type": "batch_norm",
        "conv_context_size": None,
        "dropout": 0.1,
        "dropout_pre_encoder": 0.1,
        "dropout_emb": 0.0,
        "dropout_att": 0.1,
        **ARCHITECTURES[name],
    }
    if full_size:
        encoder.update({key: FULL_SIZE[key] for key in ("d_model", "n_heads", "n_layers")})
        if name != "conformer_transducer":
            encoder["subsampling_conv_channels"] = 256
    config = {
        "sample_rate": 16000,
        "compute_eval_loss": False,
        "log_prediction": False,
        "model_defaults": {"enc_hidden": encoder["d_model"], "pred_hidden": hidden, "joint_hidden": hidden},
        "tokenizer": {"dir": str(tokenizer_dir), "type": "bpe"},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "per_feature",
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "features": encoder["feat_in"],
            "n_fft": 512,
            "frame_splicing": 1,
            "dither": 0.00001,
            "pad_to": 0,
            **PREPROCESSORS.get(name, {}),
        },
        "spec_augment": {
            "_target_": "nemo.collections.asr.modules.SpectrogramAugmentation",
            "freq_masks": 2,
            "time_masks": 10,
            "freq_width": 27,
            "time_width": 0.05,
        },
        "encoder": encoder,
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "normalization_mode": None,
            "random_state_sampling": False,
            "blank_as_pad": True,
            "prednet": {
                "pred_hidden": hidden,
                "pred_rnn_layers": sizes["pred_rnn_layers"],
                "t_max": None,
                "dropout": 0.1,
            },
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "log_softmax": None,
            "preserve_memory": False,
            "fuse_loss_wer": False,
            "fused_batch_size": 4,
            "jointnet": {"joint_hidden": hidden, "activation": "relu", "dropout": 0.1},
        },
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}},
        "loss": {"loss_name": "default", "warprnnt_numba_kwargs": {"fastemit_lambda": 0.0, "clamp": -1.0}},
        "optim": {"name": "adamw", "lr": 1e-3},
    }
    if name == "fast_conformer_tdt":
        durations = "${model.model_defaults.tdt_durations}"
        config["model_defaults"].update(tdt_durations=list(TDT_DURATIONS), num_tdt_durations=len(TDT_DURATIONS))
        config["joint"]["num_extra_outputs"] = "${model.model_defaults.num_tdt_durations}"
        config["decoding"].update(model_type="tdt", durations=durations)
        config["loss"] = {
            "loss_name": "tdt",
            "tdt_kwargs": {
                "fastemit_lambda": 0.0,
                "clamp": -1.0,
                "durations": durations,
                "sigma": TDT_SIGMA,
                "omega": 0.0,
            },
        }
    return config


def build_example_model(name: str, tokenizer_dir: str | os.PathLike, seed: int = 0, full_size: bool = False):
    """NeMo's ``EncDecRNNTBPEModel`` for `nemo_config(name, ...)`, random weights (seed `seed`), eval mode.

    NeMo initialises ``pos_bias_u/v`` to zero; they get random values so that a comparison tests their mapping.
    """
    import torch
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf

    torch.manual_seed(seed)
    # the model section under a "model" root, as in NeMo's yaml files, so that ${model...} interpolations resolve
    config = OmegaConf.create({"model": nemo_config(name, tokenizer_dir, full_size)}).model
    model = EncDecRNNTBPEModel(cfg=config)
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            if "pos_bias" in parameter_name:
                parameter.normal_(0.0, 0.5)
    return model.eval()


def save_nemo_atomic(model, path: str | os.PathLike) -> Path:
    """``model.save_to`` onto a temporary name next to `path`, renamed when complete."""
    return write_atomic(path, lambda tmp: model.save_to(str(tmp)))


def save_example_model(name: str, out_dir: str | os.PathLike, seed: int = 0, full_size: bool = False) -> Path:
    """`build_example_model` saved as ``<out_dir>/<name>.nemo`` (an existing file is never overwritten)."""
    path = Path(out_dir) / f"{name}.nemo"
    if path.exists():
        raise FileExistsError(f"{path} exists; choose another directory")
    with tempfile.TemporaryDirectory() as tmp:
        model = build_example_model(name, train_nemo_style_tokenizer(Path(tmp) / "tokenizer"), seed, full_size)
        return save_nemo_atomic(model, path)
