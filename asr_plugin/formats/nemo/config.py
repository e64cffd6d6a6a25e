"""NeMo ``model_config.yaml`` -> our `build_transducer` arguments and `NemoMelFrontend` arguments.

Every key of the ``preprocessor``, ``encoder``, ``decoder`` and ``joint`` sections must be one we know:
it either maps onto our model, changes nothing at inference (initialisation, memory or speed options,
dropouts we fold into one), or has the one value we support. Anything else raises ValueError naming
the key, so an unsupported architecture is never imported approximately. The other top-level sections
(data sets, optimiser, spec-augment, decoding, ...) describe NeMo's training run and are not read.

Cache-aware streaming encoders (NeMo's ``*_streaming`` FastConformers) map one to one: ``att_context_size`` (one
``[left, right]`` or a multi-lookahead list, the first NeMo's default), ``att_context_probs``,
``att_context_style`` (``regular``, ``chunked_limited``), ``conv_context_size`` (null, ``causal`` or ``[left,
right]``), ``conv_norm_type`` (``batch_norm``, ``layer_norm``) and ``causal_downsampling`` keep their names in
`build_transducer` (`streaming_kwargs`). Refused by key: ``chunked_limited_with_rc`` and its
``att_chunk_context_size``, ``conv_context_style: dcc``, the other convolution norms, stochastic depth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from asr_plugin.frontend.nemo import LOG_GUARD_TYPES, MEL_NORMS, NORMALIZATIONS, WINDOWS
from asr_plugin.models.conformer_block import CONV_NORM_TYPES, conv_context
from asr_plugin.models.context import CONTEXT_STYLES, FULL_CONTEXT, context_probs, context_sizes


def _equals(*allowed: Any) -> Callable[[Any], bool]:
    return lambda value: value in allowed


def _any(_value: Any) -> bool:
    return True


def _target(*names: str) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and value.rsplit(".", 1)[-1] in names


# key -> predicate of supported values, per section. Values that fail get an error naming the key.
ENCODER_KEYS: dict[str, Callable[[Any], bool]] = {
    "_target_": _target("ConformerEncoder"),
    "feat_in": _any,
    "feat_out": _equals(-1, None),
    "n_layers": _any,
    "d_model": _any,
    "n_heads": _any,
    "subsampling": _equals("striding", "dw_striding"),
    "subsampling_factor": _any,
    "subsampling_conv_channels": _any,
    "subsampling_conv_chunking_factor": _any,
    "causal_downsampling": _equals(False, True),
    "reduction": _equals(None),
    "reduction_position": _equals(None),
    "reduction_factor": _equals(1),
    "ff_expansion_factor": _any,
    "self_attention_model": _equals("rel_pos"),
    "att_context_size": _any,  # checked in streaming_kwargs
    "att_context_probs": _any,  # checked in streaming_kwargs
    "att_context_style": _equals(*CONTEXT_STYLES),  # not chunked_limited_with_rc
    "att_chunk_context_size": _equals(None),  # chunked_limited_with_rc's [left, chunk, right]
    "xscaling": _any,
    "untie_biases": _equals(True),
    "pos_emb_max_len": _any,
    "use_pytorch_sdpa": _any,
    "use_pytorch_sdpa_backends": _any,
    "conv_kernel_size": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    "conv_norm_type": _equals(*CONV_NORM_TYPES),  # not instance_norm, fused_batch_norm, group_normN
    "conv_context_size": _any,  # checked with conv_kernel_size in streaming_kwargs
    "conv_context_style": _equals("regular"),  # not dcc
    "dropout": _any,
    "dropout_pre_encoder": _any,
    "dropout_emb": _any,
    "dropout_att": _any,
    "stochastic_depth_drop_prob": _equals(0.0, 0),
    "stochastic_depth_mode": _any,
    "stochastic_depth_start_layer": _any,
    "use_bias": _any,
    "global_tokens": _equals(0),
    "global_tokens_spacing": _any,
    "global_attn_separate": _equals(False),
    "sync_max_audio_length": _any,
}
DECODER_KEYS: dict[str, Callable[[Any], bool]] = {
    "_target_": _target("RNNTDecoder"),
    "normalization_mode": _equals(None),
    "random_state_sampling": _equals(False),
    "blank_as_pad": _equals(True),
    "vocab_size": _any,
    "prednet": _any,
}
PREDNET_KEYS: dict[str, Callable[[Any], bool]] = {
    "pred_hidden": _any,
    "pred_rnn_layers": _any,
    "t_max": _any,
    "dropout": _any,
    "forget_gate_bias": _any,
    "weights_init_scale": _any,
    "hidden_hidden_bias_scale": _any,
    "rnn_hidden_size": _any,
    "norm": _equals(None, "none"),
}
JOINT_KEYS: dict[str, Callable[[Any], bool]] = {
    "_target_": _target("RNNTJoint"),
    "log_softmax": _equals(None, True),
    "preserve_memory": _any,
    "fuse_loss_wer": _any,
    "fused_batch_size": _any,
    "experimental_fuse_loss_wer": _any,
    "jointnet": _any,
    "num_classes": _any,
    "vocabulary": _any,
    "num_extra_outputs": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
}
JOINTNET_KEYS: dict[str, Callable[[Any], bool]] = {
    "joint_hidden": _any,
    "activation": _equals("relu", "tanh"),
    "dropout": _any,
    "encoder_hidden": _any,
    "pred_hidden": _any,
}
# NeMo's spellings of "no normalisation" (its streaming configs' "NA"; anything but per_feature and all_features
# normalises nothing in NeMo's preprocessor, these are the ones its configs and streaming buffer write)
NO_NORMALIZATION = ("NA", "None", "none")
# NeMo's log_zero_guard_value names: float32's finfo values (NeMo's features are float32).
LOG_GUARD_NAMES = {"tiny": float(torch.finfo(torch.float32).tiny), "eps": float(torch.finfo(torch.float32).eps)}
PREPROCESSOR_KEYS: dict[str, Callable[[Any], bool]] = {
    "_target_": _target("AudioToMelSpectrogramPreprocessor"),
    "sample_rate": _any,
    "window_size": _any,
    "window_stride": _any,
    "n_window_size": _any,
    "n_window_stride": _any,
    "window": _equals(*WINDOWS),
    "normalize": _equals(*NORMALIZATIONS, *NO_NORMALIZATION),
    "n_fft": _any,
    "preemph": _any,
    "features": _any,
    "nfilt": _any,
    "lowfreq": _any,
    "highfreq": _any,
    "log": _equals(True, False),
    "log_zero_guard_type": _equals(*LOG_GUARD_TYPES),
    "log_zero_guard_value": lambda v: (
        (isinstance(v, str) and v in LOG_GUARD_NAMES) or (isinstance(v, (int, float)) and v > 0)
    ),
    "dither": _any,
    "pad_to": _any,
    "frame_splicing": _equals(1),
    "exact_pad": _equals(False),
    "pad_value": _equals(0, 0.0),
    "mag_power": lambda v: isinstance(v, (int, float)) and v > 0,
    "mel_norm": _equals(*MEL_NORMS),
    "use_grads": _any,
    "rng": _equals(None),
    "nb_augmentation_prob": _equals(0, 0.0),
    "nb_max_freq": _any,
    "stft_exact_pad": _equals(False),
    "stft_conv": _equals(False),
    "max_duration": _any,
    "use_torchaudio": _any,
}
RNNT_LOSS_NAMES = ("default", "warprnnt_numba", "warprnnt", "pytorch", "graph_rnnt")
TDT_LOSS_NAMES = ("tdt", "tdt_pytorch")
# <loss_name>_kwargs of NeMo's loss section: what the objective depends on (clamp <= 0 is NeMo's "off"; FastEmit
# for RNN-T only); other keys are refused by name
LOSS_KWARGS: dict[str, Callable[[Any], bool]] = {
    "fastemit_lambda": _any,
    "clamp": _any,
    "durations": _any,
    "sigma": _any,
    "omega": _any,
}


def _check(section: str, node: Any, keys: Mapping[str, Callable[[Any], bool]]) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        raise ValueError(f"NeMo config: {section} must be a mapping, got {type(node).__name__}")
    for key, value in node.items():
        if key not in keys:
            raise ValueError(
                f"NeMo config: {section}.{key} is not supported by the importer "
                f"(supported keys of {section}: {sorted(keys)})"
            )
        if not keys[key](value):
            raise ValueError(f"NeMo config: {section}.{key}={value!r} is not supported by the importer")
    return dict(node)


def _required(section: str, node: Mapping[str, Any], key: str) -> Any:
    if node.get(key) is None:
        raise ValueError(f"NeMo config: {section}.{key} is missing")
    return node[key]


def _streaming_error(key: str, value: Any, err: Exception) -> ValueError:
    return ValueError(f"NeMo config: encoder.{key}={value!r} is not supported by the importer ({err})")


def streaming_kwargs(enc: Mapping[str, Any]) -> dict[str, Any]:
    """The cache-aware streaming options of a checked ``encoder`` section as `build_transducer` arguments (NeMo's
    names), each only where it differs from the full-context default, so a full-context model's arguments are
    what they were before streaming existed. Checked as NeMo's ``ConformerEncoder`` checks them (a chunked_limited
    left context a multiple of the chunk, probabilities summing to 1, ``conv_context_size`` summing to the
    kernel); ValueError naming the key otherwise."""
    style = enc.get("att_context_style", "regular")
    size, probs = enc.get("att_context_size"), enc.get("att_context_probs")
    try:
        contexts = context_sizes(size, style)
    except ValueError as err:
        raise _streaming_error("att_context_size", size, err) from None
    try:
        context_probs(probs, len(contexts))
    except (TypeError, ValueError) as err:
        raise _streaming_error("att_context_probs", probs, err) from None
    kernel, conv = int(enc.get("conv_kernel_size", 31)), enc.get("conv_context_size")
    try:
        conv_context(conv, kernel)
    except ValueError as err:
        raise _streaming_error("conv_context_size", conv, err) from None
    kwargs: dict[str, Any] = {}
    if contexts != [FULL_CONTEXT]:  # one context as [left, right], several as a list of them (NeMo's spellings)
        listed = [list(context) for context in contexts]
        kwargs["att_context_size"] = listed[0] if len(listed) == 1 else listed
    if probs is not None:
        kwargs["att_context_probs"] = [float(p) for p in probs]
    if style != "regular":
        kwargs["att_context_style"] = style
    if conv is not None:
        kwargs["conv_context_size"] = conv if isinstance(conv, str) else [int(side) for side in conv]
    if enc.get("conv_norm_type", "batch_norm") != "batch_norm":
        kwargs["conv_norm_type"] = enc["conv_norm_type"]
    if enc.get("causal_downsampling", False):
        kwargs["causal_downsampling"] = True
    return kwargs


def transducer_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """`build_transducer` keyword arguments (all but ``vocab_size``, which is NeMo's ``num_classes`` + 1)
    for NeMo's model config. Raises ValueError naming the first unsupported key or value."""
    for section in ("encoder", "decoder", "joint"):
        if section not in config:
            raise ValueError(f"NeMo config: no {section} section; only (Fast)Conformer transducers can be imported")
    lattice = lattice_record(config)
    enc = _check("encoder", config["encoder"], ENCODER_KEYS)
    dec = _check("decoder", config["decoder"], DECODER_KEYS)
    prednet = _check("decoder.prednet", _required("decoder", dec, "prednet"), PREDNET_KEYS)
    joint = _check("joint", config["joint"], JOINT_KEYS)
    jointnet = _check("joint.jointnet", _required("joint", joint, "jointnet"), JOINTNET_KEYS)

    d_model = int(_required("encoder", enc, "d_model"))
    pred_hidden = int(_required("decoder.prednet", prednet, "pred_hidden"))
    rnn_hidden = prednet.get("rnn_hidden_size") or -1
    if int(rnn_hidden) not in (-1, pred_hidden):
        raise ValueError(
            f"NeMo config: decoder.prednet.rnn_hidden_size={rnn_hidden} differs from pred_hidden="
            f"{pred_hidden} (a projected LSTM) and is not supported by the importer"
        )
    channels = enc.get("subsampling_conv_channels", -1)
    return {
        "input_dim": int(_required("encoder", enc, "feat_in")),
        "d_model": d_model,
        "num_layers": int(_required("encoder", enc, "n_layers")),
        "num_heads": int(_required("encoder", enc, "n_heads")),
        "ffn_dim": int(d_model * enc.get("ff_expansion_factor", 4)),
        "conv_kernel_size": int(enc.get("conv_kernel_size", 31)),
        "subsampling_factor": int(enc.get("subsampling_factor", 4)),
        "dropout": float(enc.get("dropout", 0.1)),
        "attention": "rel_pos",
        "subsampling": enc.get("subsampling", "striding"),
        "subsampling_channels": d_model if channels in (-1, None) else int(channels),
        "xscaling": bool(enc.get("xscaling", True)),
        "encoder_bias": bool(enc.get("use_bias", True)),
        "predictor_embed_dim": pred_hidden,
        "predictor_dim": pred_hidden,
        "predictor_layers": int(prednet.get("pred_rnn_layers", 1)),
        "predictor_dropout": float(prednet.get("dropout", 0.0)),
        "predictor_blank_as_pad": True,  # decoder.blank_as_pad (the only value accepted)
        "joint_dim": int(_required("joint.jointnet", jointnet, "joint_hidden")),
        "joint_activation": jointnet.get("activation", "relu"),
        "joint_dropout": float(jointnet.get("dropout", 0.0)),
        "blank_id": 0,
        "lattice": lattice,
        **streaming_kwargs(enc),
    }


def _loss_section(config: Mapping[str, Any]) -> tuple[bool, str, dict[str, Any]]:
    """(whether the loss is TDT, the name of its <loss_name>_kwargs section, that section checked)."""
    loss = config.get("loss") or {}
    name = loss.get("loss_name", "default")
    if name not in RNNT_LOSS_NAMES + TDT_LOSS_NAMES:
        raise ValueError(
            f"NeMo config: loss.loss_name={name!r} is neither a plain RNN-T loss {RNNT_LOSS_NAMES} "
            f"nor TDT {TDT_LOSS_NAMES}"
        )
    tdt = name in TDT_LOSS_NAMES
    section = f"{'warprnnt_numba' if name == 'default' else name}_kwargs"  # where NeMo reads them
    return tdt, section, _check(f"loss.{section}", loss.get(section) or {}, LOSS_KWARGS)


def lattice_record(config: Mapping[str, Any]) -> dict[str, Any]:
    """The model's lattice (``asr_plugin.losses.lattice_from_record``'s record) from the checkpoint's own loss:
    RNN-T with its ``clamp`` and ``fastemit_lambda``, or TDT (``loss_name: tdt``) with its ``durations``,
    ``sigma`` and ``clamp``. ValueError names a loss we cannot compute (another loss_name, FastEmit with TDT) or
    a TDT model whose joint, loss and decoding disagree."""
    tdt, section, options = _loss_section(config)
    clamp = options.get("clamp")
    clamp = float(clamp) if clamp is not None and clamp > 0 else None
    fastemit_lambda = float(options.get("fastemit_lambda") or 0.0)
    extra = int((config.get("joint") or {}).get("num_extra_outputs") or 0)
    if not tdt:
        if extra:
            raise ValueError(f"NeMo config: joint.num_extra_outputs={extra} needs a TDT loss (loss.loss_name: tdt)")
        return {"kind": "rnnt", "clamp": clamp, "fastemit_lambda": fastemit_lambda}
    if fastemit_lambda:
        raise ValueError(
            f"NeMo config: loss.{section}.fastemit_lambda={fastemit_lambda}: our TDT loss has no FastEmit "
            "(the RNN-T loss has); set it to 0.0"
        )
    durations = [int(d) for d in _required(f"loss.{section}", options, "durations")]
    if extra != len(durations):
        raise ValueError(f"NeMo config: joint.num_extra_outputs={extra} but loss.{section}.durations={durations}")
    decoding = config.get("decoding") or {}
    if (
        decoding.get("model_type", "tdt") != "tdt"
        or [int(d) for d in decoding.get("durations", durations)] != durations
    ):
        raise ValueError(
            f"NeMo config: decoding.model_type={decoding.get('model_type')!r}, decoding.durations="
            f"{decoding.get('durations')} do not decode the TDT loss' durations {durations}"
        )
    return {"kind": "tdt", "durations": durations, "sigma": float(options.get("sigma") or 0.0), "clamp": clamp}


def loss_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """`TransducerLoss` keyword arguments of the checkpoint's own loss besides its lattice (the model's,
    `lattice_record`): ``omega`` for TDT (``loss_name: tdt``), none for RNN-T."""
    tdt, _, options = _loss_section(config)
    return {"omega": float(options.get("omega") or 0.0)} if tdt else {}


def num_classes(config: Mapping[str, Any]) -> int:
    """Tokens without the blank (NeMo's ``joint.num_classes``)."""
    return int(_required("joint", config["joint"], "num_classes"))


# The longest STFT window (and hop) a preprocessor may declare: 1 s at 65 kHz.
MAX_WINDOW = 2**16


def _bounded(key: str, value: Any, least: int, most: int) -> int:
    """`value` as an integer in [least, most]; ValueError naming `key` otherwise (before it sizes anything)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"NeMo config: {key}={value!r} is not a whole number")
    if not least <= int(value) <= most:
        raise ValueError(f"NeMo config: {key}={value!r} is outside [{least}, {most}]")
    return int(value)


def frontend_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """`NemoMelFrontend` keyword arguments for NeMo's ``preprocessor`` section (ValueError names bad keys)."""
    pre = _check("preprocessor", _required("model", config, "preprocessor"), PREPROCESSOR_KEYS)
    sample_rate = _bounded("preprocessor.sample_rate", pre.get("sample_rate", 16000), 1000, 384_000)
    # As AudioToMelSpectrogramPreprocessor: window_size/window_stride (defaults 0.02 s / 0.01 s) win over
    # n_window_size/n_window_stride unless set to null, and are truncated to whole samples.
    window_size, window_stride = pre.get("window_size", 0.02), pre.get("window_stride", 0.01)
    win_length = _bounded(
        "preprocessor.window_size (in samples)",
        int(window_size * sample_rate) if window_size else _required("preprocessor", pre, "n_window_size"),
        1,
        MAX_WINDOW,
    )
    hop_length = _bounded(
        "preprocessor.window_stride (in samples)",
        int(window_stride * sample_rate) if window_stride else _required("preprocessor", pre, "n_window_stride"),
        1,
        MAX_WINDOW,
    )
    n_fft = _bounded(
        "preprocessor.n_fft", pre.get("n_fft") or 2 ** math.ceil(math.log2(win_length)), win_length, MAX_WINDOW
    )
    guard = pre.get("log_zero_guard_value", 2.0**-24)
    normalize = pre.get("normalize", "per_feature")
    return {
        "sample_rate": sample_rate,
        "num_mel_bins": _bounded("preprocessor.features", pre.get("features", pre.get("nfilt", 64)), 1, 4096),
        "n_fft": int(n_fft),
        "win_length": int(win_length),
        "hop_length": int(hop_length),
        "preemphasis": pre.get("preemph", 0.97),
        "dither": float(pre.get("dither", 1e-5)),
        "log_guard": float(LOG_GUARD_NAMES.get(guard, guard)),
        "f_min": float(pre.get("lowfreq") or 0.0),
        "f_max": float(pre["highfreq"]) if pre.get("highfreq") else None,
        "window": pre.get("window", "hann"),
        "normalize": None if normalize in NO_NORMALIZATION else normalize or None,
        "mag_power": float(pre.get("mag_power", 2.0)),
        "log": bool(pre.get("log", True)),
        "log_guard_type": pre.get("log_zero_guard_type", "add"),
        "mel_norm": pre.get("mel_norm", "slaney"),
    }
