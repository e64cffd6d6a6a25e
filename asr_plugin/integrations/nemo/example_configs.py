"""NeMo 3.0's example RNN-T configs as dicts, sized by arguments (for tests, benchmarks and demos; no NeMo needed).

``transducer_config("conformer", ...)`` is the model section of NeMo's
examples/asr/conf/conformer/conformer_transducer_bpe.yaml and ``transducer_config("fast_conformer", ...)`` that
of examples/asr/conf/fastconformer/fast-conformer_transducer_bpe.yaml, with the sizes as arguments, SpecAugment
and dither off (both random in training), every dropout set by one argument and NeMo's fused loss path off
(``joint.fuse_loss_wer: false``, the default joint). With ``labels`` instead of a
tokenizer it is the character model of the same examples (``*_transducer_char.yaml``, an ``EncDecRNNTModel``).
"""

from __future__ import annotations

from pathlib import Path

# Encoder front ends of the two examples.
ARCHITECTURES = {
    "conformer": dict(subsampling="striding", subsampling_factor=4, subsampling_conv_channels=-1, conv_kernel_size=31),
    "fast_conformer": dict(subsampling="dw_striding", subsampling_factor=8, subsampling_conv_channels=256, conv_kernel_size=9),
}
SAMPLE_RATE = 16000


def transducer_config(
    architecture: str,
    *,
    tokenizer_dir: str | Path | None = None,
    labels: list[str] | None = None,
    d_model: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    hidden: int = 24,
    pred_rnn_layers: int = 1,
    subsampling_conv_channels: int | None = None,
    activation: str = "relu",
    dropout: float = 0.0,
) -> dict:
    """The model config of NeMo's `architecture` ("conformer", "fast_conformer") example: BPE with
    `tokenizer_dir` (an ``EncDecRNNTBPEModel``), or characters with `labels` (an ``EncDecRNNTModel``).

    `hidden` is the predictor and joint width; `subsampling_conv_channels` defaults to the example's.
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {sorted(ARCHITECTURES)}, got {architecture!r}")
    if (tokenizer_dir is None) == (labels is None):
        raise ValueError("give exactly one of tokenizer_dir (a BPE model) and labels (a character model)")
    encoder = {**ARCHITECTURES[architecture]}
    if subsampling_conv_channels is not None:
        encoder["subsampling_conv_channels"] = subsampling_conv_channels
    vocabulary = {"labels": list(labels)} if labels is not None else {"tokenizer": {"dir": str(tokenizer_dir), "type": "bpe"}}
    return {
        **vocabulary,
        "sample_rate": SAMPLE_RATE,
        "compute_eval_loss": True,
        "log_prediction": False,
        "model_defaults": {"enc_hidden": d_model, "pred_hidden": hidden, "joint_hidden": hidden},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": SAMPLE_RATE,
            "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01, "window": "hann",
            "features": 80, "n_fft": 512, "frame_splicing": 1, "dither": 0.0, "pad_to": 0,
        },
        "spec_augment": None,
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": 80, "feat_out": -1,
            "n_layers": n_layers, "d_model": d_model, "n_heads": n_heads, "ff_expansion_factor": 4,
            "self_attention_model": "rel_pos", "att_context_size": [-1, -1], "xscaling": True, "untie_biases": True,
            "pos_emb_max_len": 5000, "conv_norm_type": "batch_norm", "dropout": dropout,
            "dropout_pre_encoder": dropout, "dropout_emb": 0.0, "dropout_att": dropout, **encoder,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder", "normalization_mode": None,
            "random_state_sampling": False, "blank_as_pad": True,
            "prednet": {"pred_hidden": hidden, "pred_rnn_layers": pred_rnn_layers, "t_max": None, "dropout": dropout},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None, "preserve_memory": False,
            "fuse_loss_wer": False, "fused_batch_size": 4,
            "jointnet": {"joint_hidden": hidden, "activation": activation, "dropout": dropout},
        },
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}},
        "loss": {"loss_name": "default", "warprnnt_numba_kwargs": {"fastemit_lambda": 0.0, "clamp": -1.0}},
        "optim": {"name": "adamw", "lr": 1e-3},
    }
