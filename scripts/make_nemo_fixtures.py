"""Writes small `.nemo` checkpoints (random weights) built by NeMo itself, for the importer's tests and demos.

Needs NeMo (`pip install -e '.[nemo]'`, best in its own virtual environment). Two architectures, each
NeMo's own example config (examples/asr/conf/conformer/conformer_transducer_bpe.yaml and
examples/asr/conf/fastconformer/fast-conformer_transducer_bpe.yaml of NeMo 3.0) with only the sizes
shrunk and the loss/WER fusion turned off:

    python scripts/make_nemo_fixtures.py --out /tmp/nemo_fixtures
    # -> conformer_transducer.nemo, fast_conformer_transducer.nemo (0.75 and 0.65 MB)
    python scripts/make_nemo_fixtures.py --out /tmp/nemo_full --full-size
    # the example configs' own (Large, ~120 M parameters) sizes, with a 2-layer LSTM: ~0.5 GB each

The tokenizer is a SentencePiece BPE model trained here the way NeMo's process_asr_text_tokenizer.py
does (lower case, <unk> = 0, no bos/eos), on a few sentences.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a transducer emits one token or a blank at every frame",
    "she sells sea shells by the sea shore",
    "pack my box with five dozen liquor jugs",
    "how vexingly quick daft zebras jump",
    "long utterances are where memory runs out",
]

# Sizes of the two fixtures: (config name, encoder overrides, predictor/joint width).
ARCHITECTURES = {
    "conformer_transducer": dict(
        subsampling="striding", subsampling_factor=4, subsampling_conv_channels=-1, conv_kernel_size=31,
        d_model=32, n_heads=4, n_layers=2,
    ),
    "fast_conformer_transducer": dict(
        subsampling="dw_striding", subsampling_factor=8, subsampling_conv_channels=16, conv_kernel_size=9,
        d_model=32, n_heads=4, n_layers=2,
    ),
}
HIDDEN = 24
# --full-size: the sizes the two example configs are written with (their "Large" rows), 2 LSTM layers as
# the XLarge/Parakeet rows have.
FULL_SIZE = dict(d_model=512, n_heads=8, n_layers=17, hidden=640, pred_rnn_layers=2)


def train_nemo_style_tokenizer(directory: Path, vocab_size: int = 40) -> Path:
    """A SentencePiece BPE model as NeMo's tokenizer script trains it: <unk> = 0, no bos/eos, lower case."""
    import sentencepiece as spm

    directory.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES), model_prefix=str(directory / "tokenizer"), vocab_size=vocab_size,
        model_type="bpe", character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, minloglevel=2,
    )
    vocab = [line.split("\t")[0] for line in (directory / "tokenizer.vocab").read_text().splitlines()]
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return directory


def nemo_config(name: str, tokenizer_dir: Path, full_size: bool = False) -> dict:
    """The model section of NeMo's example config for `name`, shrunk unless `full_size`."""
    sizes = FULL_SIZE if full_size else dict(hidden=HIDDEN, pred_rnn_layers=1)
    hidden = sizes["hidden"]
    encoder = {
        "_target_": "nemo.collections.asr.modules.ConformerEncoder",
        "feat_in": 80, "feat_out": -1, "causal_downsampling": False, "ff_expansion_factor": 4,
        "self_attention_model": "rel_pos", "att_context_size": [-1, -1], "att_context_style": "regular",
        "xscaling": True, "untie_biases": True, "pos_emb_max_len": 5000, "conv_norm_type": "batch_norm",
        "conv_context_size": None, "dropout": 0.1, "dropout_pre_encoder": 0.1, "dropout_emb": 0.0,
        "dropout_att": 0.1, **ARCHITECTURES[name],
    }
    if full_size:
        encoder.update({key: FULL_SIZE[key] for key in ("d_model", "n_heads", "n_layers")})
        if name == "fast_conformer_transducer":
            encoder["subsampling_conv_channels"] = 256
    return {
        "sample_rate": 16000,
        "compute_eval_loss": False,
        "log_prediction": False,
        "model_defaults": {"enc_hidden": encoder["d_model"], "pred_hidden": hidden, "joint_hidden": hidden},
        "tokenizer": {"dir": str(tokenizer_dir), "type": "bpe"},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": 16000,
            "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01, "window": "hann",
            "features": 80, "n_fft": 512, "frame_splicing": 1, "dither": 0.00001, "pad_to": 0,
        },
        "spec_augment": {
            "_target_": "nemo.collections.asr.modules.SpectrogramAugmentation",
            "freq_masks": 2, "time_masks": 10, "freq_width": 27, "time_width": 0.05,
        },
        "encoder": encoder,
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder", "normalization_mode": None,
            "random_state_sampling": False, "blank_as_pad": True,
            "prednet": {"pred_hidden": hidden, "pred_rnn_layers": sizes["pred_rnn_layers"], "t_max": None, "dropout": 0.1},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None, "preserve_memory": False,
            "fuse_loss_wer": False, "fused_batch_size": 4,
            "jointnet": {"joint_hidden": hidden, "activation": "relu", "dropout": 0.1},
        },
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}},
        "loss": {"loss_name": "default", "warprnnt_numba_kwargs": {"fastemit_lambda": 0.0, "clamp": -1.0}},
        "optim": {"name": "adamw", "lr": 1e-3},
    }


def make_fixture(name: str, out_dir: str | os.PathLike, seed: int = 0, full_size: bool = False) -> Path:
    """Builds NeMo's `name` model with random weights and saves `<out_dir>/<name>.nemo` (never overwrites)."""
    import torch
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf

    path = Path(out_dir) / f"{name}.nemo"
    if path.exists():
        raise FileExistsError(f"{path} exists; choose another --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(seed)
        tokenizer_dir = train_nemo_style_tokenizer(Path(tmp) / "tokenizer")
        model = EncDecRNNTBPEModel(cfg=OmegaConf.create(nemo_config(name, tokenizer_dir, full_size)))
        with torch.no_grad():  # NeMo initialises these to zero; random values test that they are mapped
            for parameter_name, parameter in model.named_parameters():
                if "pos_bias" in parameter_name:
                    parameter.normal_(0.0, 0.5)
        model.save_to(str(path))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for the .nemo files")
    parser.add_argument("--only", choices=sorted(ARCHITECTURES), help="write only this architecture")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full-size", action="store_true", help="the example configs' own sizes (~0.5 GB each)")
    args = parser.parse_args()
    for name in [args.only] if args.only else ARCHITECTURES:
        path = make_fixture(name, args.out, args.seed, args.full_size)
        print(f"{path}  {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
