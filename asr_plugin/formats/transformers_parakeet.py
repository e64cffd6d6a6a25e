"""A Hugging Face transformers Parakeet model directory (``ParakeetForRNNT`` / ``ParakeetForTDT``) as a model format.

The directory ``save_pretrained`` writes: ``config.json`` (``model_type`` ``parakeet_rnnt`` or ``parakeet_tdt``),
``model.safetensors`` and the processor's ``preprocessor_config.json`` (the feature extractor) and tokenizer files.
Read without transformers (only ``safetensors``, a transformers dependency), nothing in it is executed: a config
asking for remote code (``auto_map``) is refused, weights come from ``model.safetensors`` only (never a pickle).

What maps onto our Transducer, exactly (docs/transformers.md): transformers' Parakeet is NeMo's FastConformer
transducer under other names, so its weights are renamed to NeMo's (`HF_TO_NEMO`) and take NeMo's import
(``asr_plugin.formats.nemo.weights``: the blank, transformers' last id as NeMo's, moves to 0):

- ``encoder.*`` (dw_striding subsampling, relative-position attention with ``bias_u``/``bias_v``, convolution
  module, ``scale_input`` = xscaling) <-> ``encoder.*``;
- ``encoder_projector`` <-> ``joint.encoder_proj``; ``decoder.decoder_projector`` <-> ``joint.predictor_proj``
  (transformers applies it in its decoder, our joint before the sum: the same function);
- ``decoder.embedding`` / ``decoder.lstm`` <-> ``predictor.embedding`` / ``predictor.lstm`` (the blank's row is a
  trained row in transformers: ``predictor_blank_as_pad`` is off);
- ``joint.head`` <-> ``joint.output`` (a TDT head's duration rows stay after the tokens);
- ``preprocessor_config.json`` <-> a NeMo front end (``NemoMelFrontend``: preemphasis, symmetric Hann window,
  Slaney mel, log guard 2^-24 added, per-feature normalisation; no dither, which transformers never applies).

The tokenizer: ``tokenizer.json`` (a `tokenizers` model) as the SentencePiece model that encodes alike
(``asr_plugin.formats.transformers_tokenizer``), NeMo's blank convention (their token k is our k + 1).

Written (``write``, `write_parakeet_directory`): config.json and model.safetensors of our Transducer where
transformers' Parakeet expresses its architecture (rel_pos attention, dw_striding, no streaming options, one
predictor/joint size), with the generation settings and processor's files copied from the directory it was read from
(or the one a run fine-tuned, `processor_from`, after the model's tokenizer and features were found to be its own).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from asr_plugin.declared_shapes import check_architecture_bounds, check_declared_shapes, check_finite
from asr_plugin.files import fsync_path
from asr_plugin.formats.base import LoadedModel, ModelFormat, Settings, Weights
from asr_plugin.formats.json_object import read_json_object
from asr_plugin.formats.nemo.weights import convert_state_dict, to_nemo_state_dict
from asr_plugin.formats.transformers_tokenizer import TOKENIZER_NAME, read_parakeet_tokenizer
from asr_plugin.frontend.spec import complete_frontend_spec
from asr_plugin.models import build_transducer

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
FEATURES_NAME = "preprocessor_config.json"
MODEL_TYPES = {"parakeet_rnnt": "ParakeetForRNNT", "parakeet_tdt": "ParakeetForTDT"}
MAX_JSON_BYTES = 2**20  # a config is a few KiB; a larger one is refused before it is parsed
# transformers' Parakeet names <-> NeMo's: a name fragment without a leading "." is a prefix, one with it a
# part of the name (the inverse of transformers' conversion from NeMo).
HF_TO_NEMO = (
    ("encoder.subsampling.layers.", "encoder.pre_encode.conv."),
    ("encoder.subsampling.linear.", "encoder.pre_encode.out."),
    (".conv.norm.", ".conv.batch_norm."),
    (".self_attn.q_proj.", ".self_attn.linear_q."),
    (".self_attn.k_proj.", ".self_attn.linear_k."),
    (".self_attn.v_proj.", ".self_attn.linear_v."),
    (".self_attn.o_proj.", ".self_attn.linear_out."),
    (".self_attn.relative_k_proj.", ".self_attn.linear_pos."),
    (".self_attn.bias_u", ".self_attn.pos_bias_u"),
    (".self_attn.bias_v", ".self_attn.pos_bias_v"),
    ("decoder.embedding.", "decoder.prediction.embed."),
    ("decoder.lstm.", "decoder.prediction.dec_rnn.lstm."),
    ("encoder_projector.", "joint.enc."),
    ("decoder.decoder_projector.", "joint.pred."),
    ("joint.head.", "joint.joint_net.2."),  # NeMo's joint_net: activation, dropout, output layer
)
NEMO_JOINT_OUTPUT_INDEX = 2
# encoder_config keys: those that map (onto a build_transducer argument), those that change nothing at inference,
# and those that must have the one value our encoder computes.
_ENCODER_MAP = {
    "hidden_size": "d_model",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "ffn_dim",
    "conv_kernel_size": "conv_kernel_size",
    "subsampling_factor": "subsampling_factor",
    "subsampling_conv_channels": "subsampling_channels",
    "num_mel_bins": "input_dim",
    "scale_input": "xscaling",
    "attention_bias": "encoder_bias",
    "dropout": "dropout",
}
_ENCODER_REQUIRED = {"hidden_act": "silu", "subsampling_conv_kernel_size": 3, "subsampling_conv_stride": 2}


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(path, MAX_JSON_BYTES, "a transformers Parakeet directory")


def read_parakeet_config(directory: Path) -> dict[str, Any]:
    """``config.json`` of a Parakeet transducer directory; ValueError naming the file and key for anything else,
    and for a config asking for code of its own (``auto_map``, ``trust_remote_code``: nothing read is run)."""
    path = directory / CONFIG_NAME
    config = _read_json(path)
    for key in ("auto_map", "trust_remote_code"):
        if key in config:
            raise ValueError(f"{path}: {key} asks for the directory's own code, which this project never runs")
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"{path}: model_type={model_type!r}; read are {sorted(MODEL_TYPES)}")
    architectures = config.get("architectures") or [MODEL_TYPES[model_type]]
    if architectures != [MODEL_TYPES[model_type]]:
        raise ValueError(f"{path}: architectures={architectures}, expected [{MODEL_TYPES[model_type]!r}]")
    return config


def parakeet_transducer_kwargs(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """`build_transducer` keyword arguments (``vocab_size`` included) for a Parakeet ``config.json``."""
    encoder = config.get("encoder_config")
    if not isinstance(encoder, Mapping):
        raise ValueError(f"{source}: encoder_config is missing")
    for key, value in _ENCODER_REQUIRED.items():
        if encoder.get(key, value) != value:
            raise ValueError(f"{source}: encoder_config.{key}={encoder[key]!r}; our encoder computes {value!r}")
    if encoder.get("convolution_bias", True) != encoder.get("attention_bias", True):
        raise ValueError(f"{source}: encoder_config.convolution_bias differs from attention_bias; ours are one bias")
    if config.get("hidden_act", "relu") not in ("relu", "tanh"):
        raise ValueError(f"{source}: hidden_act={config['hidden_act']!r} (the joint's); read are 'relu', 'tanh'")
    vocab_size, blank = config.get("vocab_size"), config.get("blank_token_id")
    if blank != (vocab_size - 1 if isinstance(vocab_size, int) else None):
        raise ValueError(f"{source}: blank_token_id={blank!r}; read is the last id, vocab_size - 1")
    arguments = {ours: encoder[theirs] for theirs, ours in _ENCODER_MAP.items() if theirs in encoder}
    hidden = config.get("decoder_hidden_size", 640)
    durations = config.get("durations")
    lattice = {"kind": "rnnt"} if config["model_type"] == "parakeet_rnnt" else {"kind": "tdt", "durations": durations}
    return {
        **arguments,
        "vocab_size": vocab_size,
        "attention": "rel_pos",
        "subsampling": "dw_striding",
        "predictor_embed_dim": hidden,
        "predictor_dim": hidden,
        "predictor_layers": config.get("num_decoder_layers", 2),
        "predictor_dropout": 0.0,  # transformers' decoder has none
        "joint_dim": hidden,
        "joint_activation": config.get("hidden_act", "relu"),
        "joint_dropout": 0.0,  # nor its joint
        "lattice": lattice,
    }


def parakeet_architecture(path: str | os.PathLike, vocab_size: int | None = None, **overrides: Any) -> dict[str, Any]:
    """The `build_transducer` keyword arguments of the Parakeet directory `path` (``vocab_size``: the given one,
    else the config's; `overrides` replace arguments), bounded like every architecture read from a file."""
    directory = Path(path)
    source = str(directory / CONFIG_NAME)
    arguments = parakeet_transducer_kwargs(read_parakeet_config(directory), source)
    arguments = {**arguments, **overrides, "vocab_size": vocab_size or arguments["vocab_size"]}
    check_architecture_bounds(arguments, f"{source} (with the recipe's vocab_size and overrides)")
    return arguments


def parakeet_settings(config: Mapping[str, Any], source: str) -> Settings:
    """What transformers' Parakeet computes by default: its greedy cap (``max_symbols_per_step``) and its loss's
    reduction (transformers 5.23.0's ParakeetForRNNT loss: per token, ``mean_volume``; its TDT loss: each
    utterance's per token, averaged, ``mean``)."""
    reduction = "mean_volume" if config["model_type"] == "parakeet_rnnt" else "mean"
    return Settings(
        {"max_symbols_per_frame": config.get("max_symbols_per_step"), "loss_reduction": reduction}, source=source
    )


def parakeet_frontend_spec(directory: Path) -> dict[str, Any] | None:
    """The front-end spec of ``preprocessor_config.json`` (None without one): a NeMo front end."""
    path = directory / FEATURES_NAME
    if not path.exists():
        return None
    node = _read_json(path)
    if node.get("feature_extractor_type", "ParakeetFeatureExtractor") != "ParakeetFeatureExtractor":
        raise ValueError(f"{path}: feature_extractor_type={node['feature_extractor_type']!r}")
    options = {
        "sample_rate": node.get("sampling_rate", 16000),
        "num_mel_bins": node.get("feature_size", 80),
        "n_fft": node.get("n_fft", 512),
        "win_length": node.get("win_length", 400),
        "hop_length": node.get("hop_length", 160),
        "preemphasis": node.get("preemphasis", 0.97),
        "dither": 0.0,  # transformers never dithers
    }
    for key, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 2**20:
            raise ValueError(f"{path}: {key}={value!r} is not a size this project reads")
    return {"kind": "nemo", "options": options}


def _safetensors(directory: Path, data: bool) -> dict[str, torch.Tensor]:
    """``model.safetensors``'s tensors: with `data` memory-mapped, else as meta tensors of the stored shapes and
    dtypes (its header only, for the declared-size checks)."""
    from safetensors import SafetensorError, safe_open

    path = directory / WEIGHTS_NAME
    if not path.is_file():
        pickles = sorted(p.name for p in directory.glob("*.bin"))
        extra = f" (the pickle(s) {pickles} are never read)" if pickles else ""
        raise ValueError(f"{path}: no such file{extra}")
    try:
        with safe_open(str(path), framework="pt") as file:
            if data:
                return {key: file.get_tensor(key) for key in file.keys()}
            dtypes = {
                "F32": torch.float32,
                "F16": torch.float16,
                "BF16": torch.bfloat16,
                "F64": torch.float64,
                "I64": torch.int64,  # BatchNorm's num_batches_tracked
            }
            shapes = {}
            for key in file.keys():
                view = file.get_slice(key)
                dtype = dtypes.get(view.get_dtype())
                if dtype is None:
                    raise ValueError(f"{path}: weight {key} has dtype {view.get_dtype()}, not one of {sorted(dtypes)}")
                shapes[key] = torch.empty(view.get_shape(), dtype=dtype, device="meta")
            return shapes
    except SafetensorError as err:
        raise ValueError(f"{path}: not a readable safetensors file ({err})") from None


def _renamed(key: str, pairs: Sequence[tuple[str, str]]) -> str:
    """`key` with every (from, to) of `pairs` applied: a prefix `from` at the start, a ".part" anywhere."""
    for before, after in pairs:
        if before.startswith("."):
            key = key.replace(before, after)
        elif key.startswith(before):
            key = after + key[len(before) :]
    return key


def _to_ours(state: Mapping[str, torch.Tensor], arguments: Mapping[str, Any], source: str) -> dict[str, torch.Tensor]:
    nemo = {_renamed(key, HF_TO_NEMO): value for key, value in state.items()}
    durations = arguments["lattice"].get("durations") or ()
    ours, report = convert_state_dict(nemo, len(durations))
    if report.not_imported:
        raise ValueError(f"{source}: weights with no counterpart in our model: {sorted(report.not_imported)[:5]}")
    return ours


def read_parakeet_weights(directory: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(`build_transducer` arguments, our state dict) of a Parakeet directory, after its declared sizes were
    bounded and found equal to the stored shapes (read from the header alone) and its weights finite."""
    source = str(directory / CONFIG_NAME)
    arguments = parakeet_transducer_kwargs(read_parakeet_config(directory), source)
    shapes = _to_ours(_safetensors(directory, data=False), arguments, source)
    check_declared_shapes(lambda: build_transducer(**arguments), arguments, shapes, str(directory / WEIGHTS_NAME))
    stored = _safetensors(directory, data=True)
    check_finite(stored, str(directory / WEIGHTS_NAME))
    return arguments, _to_ours(stored, arguments, source)


# build_transducer arguments a transformers Parakeet cannot express unless they have these values.
_REQUIRED_FOR_WRITING = {
    "attention": "rel_pos",
    "subsampling": "dw_striding",
    "att_context_size": None,
    "att_context_probs": None,
    "att_context_style": "regular",
    "conv_context_size": None,
    "conv_norm_type": "batch_norm",
    "causal_downsampling": False,
}
# config.json keys a written directory takes from the directory the model was read from (a tokenizer's ids).
_KEPT_FROM_SOURCE = ("pad_token_id", "decoder_start_token_id", "max_symbols_per_step", "bos_token_id", "eos_token_id")
# the generation settings and the processor's files, copied from the directory the model was read from
PROCESSOR_FILES = (
    "generation_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def parakeet_config(arguments: Mapping[str, Any], source_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config.json`` of the Parakeet with our `arguments` (ValueError naming one it cannot express); the token
    ids of `source_config` (a Parakeet directory's) are kept, else the blank serves as pad and start symbol."""
    for key, value in _REQUIRED_FOR_WRITING.items():
        if arguments.get(key, value) != value:
            raise ValueError(f"{key}={arguments[key]!r}: a transformers Parakeet has {key}={value!r}")
    hidden = arguments.get("predictor_dim", 320)
    for key in ("predictor_embed_dim", "joint_dim"):
        if arguments.get(key, 320) != hidden:
            raise ValueError(f"{key}={arguments.get(key, 320)} != predictor_dim={hidden}: Parakeet's are one size")
    activation = arguments.get("joint_activation", "tanh")
    if activation not in ("relu", "tanh"):
        raise ValueError(f"joint_activation={activation!r}: a Parakeet joint computes 'relu' or 'tanh'")
    lattice = arguments.get("lattice") or {"kind": "rnnt"}
    encoder = {theirs: arguments[ours] for theirs, ours in _ENCODER_MAP.items() if ours in arguments}
    encoder.update(convolution_bias=encoder.get("attention_bias", True), layerdrop=0.0)
    blank = arguments["vocab_size"] - 1
    config = {
        "model_type": "parakeet_tdt" if lattice["kind"] == "tdt" else "parakeet_rnnt",
        "vocab_size": arguments["vocab_size"],
        "blank_token_id": blank,
        "pad_token_id": blank,
        "decoder_start_token_id": blank,
        "decoder_hidden_size": hidden,
        "num_decoder_layers": arguments.get("predictor_layers", 1),
        "hidden_act": activation,
        "encoder_config": encoder,
    }
    if lattice["kind"] == "tdt":
        config["durations"] = list(lattice["durations"])
    config.update({key: source_config[key] for key in _KEPT_FROM_SOURCE if key in (source_config or {})})
    config["architectures"] = [MODEL_TYPES[config["model_type"]]]
    return config


def parakeet_state_dict(model: torch.nn.Module, arguments: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Our Transducer's weights under transformers' names (the blank back to the last id)."""
    durations = (arguments.get("lattice") or {}).get("durations") or ()
    nemo = to_nemo_state_dict(model.state_dict(), NEMO_JOINT_OUTPUT_INDEX, len(durations))
    back = [(after, before) for before, after in HF_TO_NEMO]
    return {_renamed(key, back): value.detach().cpu().contiguous() for key, value in nemo.items()}


def _check_same_processor(loaded: LoadedModel, read_from: Path) -> None:
    """ValueError unless `loaded` (fine-tuned from the Parakeet directory `read_from`) has its tokenizer and
    features, so that the processor's files copied from there describe the model written."""
    config = read_parakeet_config(read_from)
    if loaded.tokenizer is not None and loaded.tokenizer != read_parakeet_tokenizer(read_from, config["vocab_size"]):
        raise ValueError(f"{loaded.paths[-1]}: its tokenizer is not {read_from / TOKENIZER_NAME}'s")
    spec = parakeet_frontend_spec(read_from)
    if loaded.frontend_spec is not None and spec is not None:
        if complete_frontend_spec(loaded.frontend_spec) != complete_frontend_spec(spec):
            raise ValueError(f"{loaded.paths[-1]}: its features are not those of {read_from / FEATURES_NAME}")


def write_parakeet_directory(loaded: LoadedModel, directory: Path, processor_from: Path | None = None) -> Path:
    """Writes `loaded` as a transformers Parakeet directory that ``from_pretrained`` loads: config.json,
    model.safetensors and the processor's files of `processor_from` (a Parakeet directory, by default the one
    `loaded` was read from, if any: a model fine-tuned from it must have its tokenizer and features), with its
    token ids in config.json. The files go to a hidden staging directory beside `directory`, renamed to it when
    complete; an existing `directory` is refused."""
    from safetensors.torch import save_file

    directory = Path(directory).absolute()
    if directory.exists():
        raise FileExistsError(f"{directory} exists: a transformers directory is written to a new path")
    read_from = loaded.paths[-1] if loaded.format == "transformers" and loaded.paths else None
    if processor_from is not None:
        read_from = Path(processor_from)
        _check_same_processor(loaded, read_from)
    source_config = read_parakeet_config(read_from) if read_from is not None else None
    config = parakeet_config(loaded.architecture, source_config)
    state = parakeet_state_dict(loaded.model, loaded.architecture)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.with_name(f".{directory.name}.{secrets.token_hex(4)}.staging")
    staging.mkdir()
    try:
        (staging / CONFIG_NAME).write_text(json.dumps(config, indent=2))
        save_file(state, str(staging / WEIGHTS_NAME), metadata={"format": "pt"})
        for name in PROCESSOR_FILES if read_from is not None else ():
            if (read_from / name).is_file():
                shutil.copyfile(read_from / name, staging / name)
        for path in staging.iterdir():
            fsync_path(path)
        staging.rename(directory)
        fsync_path(directory.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


class TransformersParakeetFormat(ModelFormat):
    """A transformers ``ParakeetForRNNT`` / ``ParakeetForTDT`` directory: architecture, weights and front end."""

    name = "transformers"
    description = "a transformers Parakeet model directory"
    finetune_preset = "from_transformers"
    architecture_target = "asr_plugin.formats.transformers_recipe.parakeet_transducer"  # conf/model/transformers.yaml

    def claims(self, path: Path) -> bool:
        try:
            return path.is_dir() and _read_json(path / CONFIG_NAME).get("model_type") in MODEL_TYPES
        except (OSError, ValueError):
            return False

    def read_model(self, paths: Sequence[Path], device: str | torch.device = "cpu") -> LoadedModel:
        if len(paths) != 1:
            raise ValueError(f"{[str(p) for p in paths]}: a transformers directory holds one model; give one")
        directory = paths[0]
        arguments, state = read_parakeet_weights(directory)
        model = build_transducer(**arguments)
        model.load_state_dict(state)
        return LoadedModel(
            model.eval().to(device),
            arguments,
            tokenizer=read_parakeet_tokenizer(directory, arguments["vocab_size"]),
            frontend_spec=parakeet_frontend_spec(directory),
            settings=self.read_settings(directory),
            paths=(directory,),
            format=self.name,
            missing=f"it has no {TOKENIZER_NAME}: fine-tune it with the recipe's tokenizer, or decode to token ids",
        )

    def read_weights(self, path: Path, blank_id: int | None = None) -> Weights:
        return Weights(read_parakeet_weights(path)[1])

    def read_settings(self, path: Path) -> Settings:
        return parakeet_settings(read_parakeet_config(path), str(path))

    def read_architecture(self, path: Path, vocab_size: int | None = None, **overrides: Any) -> dict[str, Any]:
        return parakeet_architecture(path, vocab_size, **overrides)

    def write(self, model: LoadedModel, path: Path) -> Path:
        return write_parakeet_directory(model, path)
