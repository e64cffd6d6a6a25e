"""``write_nemo(source, path)``: our transducer as a NeMo 3.0 ``.nemo`` file that ``ASRModel.restore_from`` loads.

The archive is laid out as NeMo's ``save_to`` writes it (no NeMo needed to write it): ``model_config.yaml``
(an ``EncDecRNNTBPEModel``, or an ``EncDecHybridRNNTCTCBPEModel`` when the source has an auxiliary CTC head,
with the sections `asr_plugin.formats.nemo.config` reads back: ``preprocessor``, ``encoder``, ``decoder``,
``joint``, ``tokenizer``, ``decoding``, ``loss``), ``model_weights.ckpt`` (NeMo's key names, every
token-indexed table with the blank moved back to the end) and the SentencePiece model with its vocabulary
files. `import_nemo` of the result gives the source model back.

Tokenizers: a NeMo tokenizer ("nemo" convention: the blank is not a SentencePiece piece) maps our id k to
NeMo's k - 1 and our blank to NeMo's last id. One of this project's own ("asr_plugin" convention: the blank is
SentencePiece's control piece 0) keeps SentencePiece's ids as NeMo's classes, so NeMo has one class more
than we have ids: class 0, the control piece, which the exported output layer never emits (zero weights,
bias `NEVER_EMITTED`) and the embedding never sees; our blank becomes NeMo's blank after the last piece.

Only what NeMo's classes express is exported: relative-position attention, ``striding``/``dw_striding``
subsampling, an embedding as wide as the LSTM, a ReLU or tanh joint, NeMo's front end (``"nemo"`` front-end
spec); anything else is a ValueError naming the setting. A cache-aware streaming encoder keeps its options in
NeMo's spelling (``att_context_size`` with every lookahead, ``att_context_style``, ``att_context_probs``,
``conv_context_size``, ``conv_norm_type``, ``causal_downsampling``), so NeMo's own cache-aware inference runs it.
The file is written to a temporary name in the same directory and renamed when complete.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch
import yaml

from asr_plugin.files import write_atomic
from asr_plugin.formats.base import LoadedModel
from asr_plugin.formats.nemo.archive import CONFIG_NAME, WEIGHTS_NAME, is_nemo_archive
from asr_plugin.formats.nemo.importer import NemoImport
from asr_plugin.formats.nemo.training_options import nemo_spec_augment_section
from asr_plugin.formats.nemo.weights import to_nemo_state_dict
from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.losses import TDT, TransducerLattice
from asr_plugin.models.context import context_sizes
from asr_plugin.models.encoder import SUBSAMPLING_TYPES
from asr_plugin.text.tokenizer import Tokenizer

RNNT_TARGET = "nemo.collections.asr.models.EncDecRNNTBPEModel"
HYBRID_TARGET = "nemo.collections.asr.models.EncDecHybridRNNTCTCBPEModel"
TOKENIZER_FILES = {"model_path": "tokenizer.model", "vocab_path": "vocab.txt", "spe_tokenizer_vocab": "tokenizer.vocab"}
NEVER_EMITTED = -1e4  # output bias of NeMo's class 0 for an "asr_plugin" tokenizer: probability exp(-1e4) = 0
NEMO_ACTIVATIONS = ("relu", "tanh")


# What the writer takes where the model's file records nothing (`LoadedModel.settings`): NeMo's own defaults, and
# 0.3 for the auxiliary CTC weight of a hybrid (the recipe's).
DEFAULT_SETTINGS = {
    "ctc_weight": 0.3,
    "max_symbols_per_frame": 10,
    "loss_reduction": "mean_batch",
    "ctc_reduction": "mean_batch",
}


def _setting(model: LoadedModel, key: str) -> Any:
    return model.settings.get(key, DEFAULT_SETTINGS.get(key))


def _check_exportable(architecture: Mapping[str, Any], frontend_spec: Mapping[str, Any]) -> None:
    """ValueError naming the first setting NeMo's model classes cannot express."""
    problems = []
    if architecture.get("attention", "mha") != "rel_pos":
        problems.append(f"attention={architecture.get('attention', 'mha')!r} (NeMo's Conformer: rel_pos)")
    if architecture.get("subsampling", "conv2d") not in ("striding", "dw_striding"):
        problems.append(f"subsampling={architecture.get('subsampling', 'conv2d')!r} (NeMo: striding, dw_striding)")
    if architecture["ffn_dim"] % architecture["d_model"]:
        problems.append(f"ffn_dim={architecture['ffn_dim']} is not a multiple of d_model={architecture['d_model']}")
    if architecture["predictor_embed_dim"] != architecture["predictor_dim"]:
        problems.append(
            f"predictor_embed_dim={architecture['predictor_embed_dim']} differs from predictor_dim="
            f"{architecture['predictor_dim']} (NeMo's embedding is as wide as its LSTM)"
        )
    if architecture.get("joint_activation", "tanh") not in NEMO_ACTIVATIONS:
        problems.append(f"joint_activation={architecture.get('joint_activation')!r} (NeMo: {NEMO_ACTIVATIONS})")
    probs = architecture.get("att_context_probs")
    if probs is not None and sum(float(p) for p in probs) != 1:
        problems.append(f"att_context_probs={list(probs)} (NeMo's ConformerEncoder wants a sum of exactly 1)")
    contexts = context_sizes(architecture.get("att_context_size"), architecture.get("att_context_style", "regular"))
    if architecture.get("att_context_style") == "chunked_limited" and len(contexts) == 1 and contexts[0][1] < 0:
        problems.append("a single chunked_limited att_context_size with an unlimited right context (NeMo refuses it)")
    if architecture.get("blank_id", 0) != 0:
        problems.append(f"blank_id={architecture['blank_id']}")
    if frontend_spec.get("kind") != "nemo":
        problems.append(
            f"front end of kind {frontend_spec.get('kind')!r}: NeMo's preprocessor computes only "
            "the 'nemo' front end (train with data.frontend=nemo, or fine-tune with +finetune=from_nemo)"
        )
    if problems:
        raise ValueError("export_nemo: NeMo cannot express " + "; ".join(problems))


def streaming_section(architecture: Mapping[str, Any]) -> dict[str, Any]:
    """The cache-aware streaming keys of NeMo's ``encoder`` section for our architecture (the inverse of
    `asr_plugin.formats.nemo.config.streaming_kwargs`; a full-context model's are NeMo's defaults):
    ``att_context_size`` as one ``[left, right]`` or the list of a multi-lookahead model (its first NeMo's
    default, as ours), ``att_context_style``, ``att_context_probs`` (null: uniform, in both),
    ``conv_context_size``, ``conv_norm_type`` and ``causal_downsampling``."""
    style = architecture.get("att_context_style", "regular")
    contexts = [list(context) for context in context_sizes(architecture.get("att_context_size"), style)]
    probs, conv = architecture.get("att_context_probs"), architecture.get("conv_context_size")
    return {
        "causal_downsampling": bool(architecture.get("causal_downsampling", False)),
        "att_context_size": contexts[0] if len(contexts) == 1 else contexts,
        "att_context_style": style,
        "att_context_probs": None if probs is None else [float(p) for p in probs],
        "conv_norm_type": architecture.get("conv_norm_type", "batch_norm"),
        "conv_context_size": conv if conv is None or isinstance(conv, str) else [int(side) for side in conv],
    }


def preprocessor_section(options: Mapping[str, Any]) -> dict[str, Any]:
    """NeMo's ``preprocessor`` for `NemoMelFrontend` arguments (the inverse of `frontend_kwargs`)."""
    frontend = NemoMelFrontend(**options)  # fills the defaults and checks the values
    return {
        "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
        "sample_rate": frontend.sample_rate,
        "window_size": None,
        "window_stride": None,
        "n_window_size": frontend.win_length,
        "n_window_stride": frontend.hop_length,
        "n_fft": frontend.n_fft,
        "features": frontend.num_mel_bins,
        "window": frontend.window_name,
        "normalize": frontend.normalize,
        "preemph": frontend.preemphasis,
        "dither": frontend.dither,
        "lowfreq": frontend.f_min,
        "highfreq": frontend.f_max,
        "log": frontend.log,
        "log_zero_guard_type": frontend.log_guard_type,
        "log_zero_guard_value": frontend.log_guard,
        "mag_power": frontend.mag_power,
        "mel_norm": frontend.mel_norm,
        "pad_to": 0,
        "frame_splicing": 1,
        "exact_pad": False,
        "pad_value": 0.0,
    }


def _num_classes(tokenizer: Tokenizer) -> int:
    """NeMo's ``num_classes`` (tokens without its blank): the SentencePiece model's pieces."""
    return tokenizer.vocab_size - (1 if tokenizer.convention == "nemo" else 0)


def nemo_loss_section(lattice: TransducerLattice, omega: float = 0.0) -> dict[str, Any]:
    """NeMo's ``loss`` section for our lattice (and a TDT loss's omega): its numba RNN-T loss with clamp and
    fastemit_lambda, or its TDT loss with durations, sigma and clamp (NeMo's clamp <= 0: off)."""
    clamp = float(lattice.clamp) if lattice.clamp else -1.0
    if isinstance(lattice, TDT):
        return {
            "loss_name": "tdt",
            "tdt_kwargs": {
                "fastemit_lambda": 0.0,
                "clamp": clamp,
                "durations": list(lattice.durations),
                "sigma": lattice.sigma,
                "omega": float(omega),
            },
        }
    return {
        "loss_name": "default",
        "warprnnt_numba_kwargs": {"fastemit_lambda": lattice.fastemit_lambda, "clamp": clamp},
    }


def encoder_section(arch: Mapping[str, Any]) -> dict[str, Any]:
    """NeMo's ``ConformerEncoder`` section of our architecture `arch`."""
    d_model = int(arch["d_model"])
    _, _, default_channels = SUBSAMPLING_TYPES[arch["subsampling"]]
    return {
        "_target_": "nemo.collections.asr.modules.ConformerEncoder",
        "feat_in": int(arch["input_dim"]),
        "feat_out": -1,
        "n_layers": int(arch["num_layers"]),
        "d_model": d_model,
        "n_heads": int(arch["num_heads"]),
        "subsampling": arch["subsampling"],
        "subsampling_factor": int(arch["subsampling_factor"]),
        "subsampling_conv_channels": int(arch.get("subsampling_channels") or default_channels or d_model),
        "ff_expansion_factor": int(arch["ffn_dim"]) // d_model,
        "self_attention_model": "rel_pos",
        **streaming_section(arch),
        "xscaling": bool(arch["xscaling"]),
        "untie_biases": True,
        "pos_emb_max_len": 5000,
        "conv_kernel_size": int(arch["conv_kernel_size"]),
        "use_bias": bool(arch.get("encoder_bias", True)),
        "dropout": float(arch["dropout"]),
        "dropout_pre_encoder": float(arch["dropout"]),
        "dropout_emb": 0.0,
        "dropout_att": float(arch["dropout"]),
    }


def decoder_section(arch: Mapping[str, Any], classes: int) -> dict[str, Any]:
    """NeMo's ``RNNTDecoder`` (the predictor) section of `arch`, over `classes` non-blank classes."""
    return {
        "_target_": "nemo.collections.asr.modules.RNNTDecoder",
        "normalization_mode": None,
        "random_state_sampling": False,
        "blank_as_pad": True,
        "vocab_size": classes,
        "prednet": {
            "pred_hidden": int(arch["predictor_dim"]),
            "pred_rnn_layers": int(arch["predictor_layers"]),
            "t_max": None,
            "dropout": float(arch["predictor_dropout"]),
        },
    }


def joint_section(
    arch: Mapping[str, Any], classes: int, vocabulary: list[str], lattice: TransducerLattice
) -> dict[str, Any]:
    """NeMo's ``RNNTJoint`` section of `arch`; a TDT `lattice`'s durations are its extra outputs."""
    joint = {
        "_target_": "nemo.collections.asr.modules.RNNTJoint",
        "log_softmax": None,
        "preserve_memory": False,
        "fuse_loss_wer": False,
        "fused_batch_size": 4,
        "num_classes": classes,
        "vocabulary": vocabulary,
        "jointnet": {
            "joint_hidden": int(arch["joint_dim"]),
            "activation": arch.get("joint_activation", "tanh"),
            "dropout": float(arch.get("joint_dropout", 0.0)),
            "encoder_hidden": int(arch["d_model"]),
            "pred_hidden": int(arch["predictor_dim"]),
        },
    }
    if isinstance(lattice, TDT):
        joint["num_extra_outputs"] = len(lattice.durations)
    return joint


def decoding_section(source: LoadedModel) -> dict[str, Any]:
    """NeMo's greedy decoding with the model's greedy cap; a TDT model's with its durations."""
    decoding = {
        "strategy": "greedy_batch",
        "greedy": {"max_symbols": int(_setting(source, "max_symbols_per_frame"))},
    }
    if isinstance(source.model.lattice, TDT):
        decoding.update(model_type="tdt", durations=list(source.model.lattice.durations))
    return decoding


def dataset_sections(sample_rate: int) -> dict[str, Any]:
    """``train_ds`` and ``validation_ds`` (NeMo's transcribe reads validation_ds; the manifests are the NeMo
    user's to fill in for training)."""
    return {
        name: {
            "manifest_filepath": None,
            "sample_rate": sample_rate,
            "batch_size": 16,
            "shuffle": shuffle,
            "use_start_end_token": False,
        }
        for name, shuffle in (("train_ds", True), ("validation_ds", False))
    }


def aux_ctc_section(source: LoadedModel, classes: int, vocabulary: list[str]) -> dict[str, Any]:
    """A hybrid model's ``aux_ctc`` section: the CTC head on the encoder and its loss settings."""
    return {
        "ctc_loss_weight": float(_setting(source, "ctc_weight")),
        "use_cer": False,
        "ctc_reduction": _setting(source, "ctc_reduction"),
        "decoder": {
            "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
            "feat_in": int(source.architecture["d_model"]),
            "num_classes": classes,
            "vocabulary": vocabulary,
        },
        "decoding": {"strategy": "greedy"},
    }


def nemo_model_config(source: LoadedModel, vocabulary: list[str]) -> dict[str, Any]:
    """The ``model_config.yaml`` of the export (see the module docstring), section by section."""
    arch, frontend_spec = source.architecture, source.require_frontend_spec()
    _check_exportable(arch, frontend_spec)
    classes = _num_classes(source.require_tokenizer())
    preprocessor = preprocessor_section(frontend_spec["options"])
    config: dict[str, Any] = {
        "target": HYBRID_TARGET if source.auxiliary_ctc is not None else RNNT_TARGET,
        # NeMo's model classes copy the joint's input sizes from here
        "model_defaults": {
            "enc_hidden": int(arch["d_model"]),
            "pred_hidden": int(arch["predictor_dim"]),
            "joint_hidden": int(arch["joint_dim"]),
        },
        "tokenizer": {"dir": None, "type": "bpe", **{key: f"nemo:{name}" for key, name in TOKENIZER_FILES.items()}},
        "preprocessor": preprocessor,
        "encoder": encoder_section(arch),
        "decoder": decoder_section(arch, classes),
        # NeMo's TDT layout: the joint's extra outputs, the decoding and the loss agree
        "joint": joint_section(arch, classes, vocabulary, source.model.lattice),
        "decoding": decoding_section(source),
        "rnnt_reduction": _setting(source, "loss_reduction"),
        "spec_augment": nemo_spec_augment_section(_setting(source, "spec_augment")),
        "loss": nemo_loss_section(source.model.lattice, float(_setting(source, "omega") or 0.0)),
        "sample_rate": preprocessor["sample_rate"],  # transcribe resamples to it
        **dataset_sections(preprocessor["sample_rate"]),
    }
    if source.auxiliary_ctc is not None:
        config["aux_ctc"] = aux_ctc_section(source, classes, vocabulary)
    return config


def _nemo_rows(table: torch.Tensor, tokenizer: Tokenizer, filler: float = 0.0) -> torch.Tensor:
    """(V, ...) rows in our order -> NeMo's: an "asr_plugin" tokenizer's NeMo class 0 (never emitted) is a
    `filler` row in front. The blank's move is done by `to_nemo_state_dict` for the transducer."""
    if tokenizer.convention == "nemo":
        return table
    return torch.cat([torch.full_like(table[:1], filler), table])


def nemo_weights(source: LoadedModel) -> dict[str, torch.Tensor]:
    """NeMo's state dict of the export, preprocessor buffers included."""
    tokenizer = source.require_tokenizer()
    state = {key: value.detach().clone() for key, value in source.model.state_dict().items()}
    # an "asr_plugin" tokenizer's extra NeMo class 0 goes before our token rows (a TDT joint's duration rows
    # stay after them); the blank moves to the end of the tokens in to_nemo_state_dict
    vocab, extra = source.model.vocab_size, source.model.lattice.num_extra_outputs
    for key, filler in (
        ("predictor.embedding.weight", 0.0),
        ("joint.output.weight", 0.0),
        ("joint.output.bias", NEVER_EMITTED),
    ):
        rows = state[key]
        state[key] = torch.cat([rows[:1], _nemo_rows(rows[1:vocab], tokenizer, filler), rows[vocab:]])
    ctc = None
    if source.auxiliary_ctc is not None:
        ctc = {}
        for key, filler in (("output.weight", 0.0), ("output.bias", NEVER_EMITTED)):
            value = source.auxiliary_ctc[key].detach().clone()
            ctc[key] = torch.cat([value[:1], _nemo_rows(value[1:], tokenizer, filler)])
    dropout = float(source.architecture.get("joint_dropout", 0.0))
    nemo = to_nemo_state_dict(state, joint_output_index=2 if dropout else 1, num_extra_outputs=extra, auxiliary_ctc=ctc)
    frontend = NemoMelFrontend(**source.require_frontend_spec()["options"])
    nemo["preprocessor.featurizer.window"] = frontend.window.clone()
    nemo["preprocessor.featurizer.fb"] = frontend.fbank.T.unsqueeze(0).contiguous()  # (1, F, n_fft/2 + 1)
    return nemo


def tokenizer_files(tokenizer: Tokenizer) -> tuple[dict[str, bytes], list[str]]:
    """The SentencePiece files NeMo's ``tokenizer`` section names, and the vocabulary (NeMo's class order)."""
    processor = spm.SentencePieceProcessor(model_proto=tokenizer.model_bytes)
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    scores = [processor.get_score(i) for i in range(processor.get_piece_size())]
    files = {
        TOKENIZER_FILES["model_path"]: tokenizer.model_bytes,
        TOKENIZER_FILES["vocab_path"]: "".join(f"{piece}\n" for piece in pieces).encode(),
        TOKENIZER_FILES["spe_tokenizer_vocab"]: "".join(f"{p}\t{s}\n" for p, s in zip(pieces, scores)).encode(),
    }
    return files, pieces


def check_nemo_output(path: str | os.PathLike, sources: Sequence[str | os.PathLike] = ()) -> None:
    """ValueError when `path`, the ``.nemo`` file to write, is a directory, is one of `sources` (the files the
    model is read from: the export would replace its own input) or is an existing file that is not a ``.nemo``
    (a training checkpoint given as the output would lose its optimizer, schedule and loop state for good)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"export_nemo: {path} is a directory; name the .nemo file to write")
    for source in sources:
        if path.resolve() == Path(source).resolve():
            raise ValueError(f"export_nemo: the output {path} is the source {source} itself; name another file")
    if path.exists() and not is_nemo_archive(path):
        raise ValueError(
            f"export_nemo: the output {path} exists and is not a .nemo file; an export replaces only a .nemo, "
            "so name a new file (or remove this one first)"
        )


def write_nemo(source: NemoImport | LoadedModel, path: str | os.PathLike) -> Path:
    """Writes `source` as the ``.nemo`` file `path` (atomically) and returns `path`.

    Args:
        source: what `import_nemo` returned, or a `LoadedModel` (``asr_plugin.formats.export_nemo`` also takes a
            model file's path); what it records nothing of, NeMo's defaults (`DEFAULT_SETTINGS`).
        path: the ``.nemo`` file to write (replaced if it is a ``.nemo``; a directory, the source's own file
            or a file of another kind is refused: `check_nemo_output`, and for a directory see
            `asr_plugin.formats.nemo.output_path.nemo_output_path`).
    """
    if isinstance(source, NemoImport):
        source = source.loaded()
    check_nemo_output(path, source.paths)
    tokenizer = source.require_tokenizer()
    if source.model.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"export_nemo: the model has {source.model.vocab_size} outputs, its tokenizer {tokenizer.vocab_size} ids"
        )
    files, vocabulary = tokenizer_files(tokenizer)
    config = nemo_model_config(source, vocabulary)
    weights = io.BytesIO()
    torch.save(nemo_weights(source), weights)
    members = {CONFIG_NAME: yaml.safe_dump(config, sort_keys=False).encode(), WEIGHTS_NAME: weights.getvalue(), **files}

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w") as tar:  # NeMo's layout: ./<member>, uncompressed
            for name, data in members.items():
                info = tarfile.TarInfo(f"./{name}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))

    return write_atomic(path, write)
