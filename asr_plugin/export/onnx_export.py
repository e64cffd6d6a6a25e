"""ONNX export in sherpa-onnx's NeMo transducer layout: encoder.onnx, decoder.onnx, joiner.onnx, tokens.txt.

    export_onnx(model, frontend_spec, tokenizer, "exp/sherpa", int8=True)
    recognizer = sherpa_onnx.OfflineRecognizer.from_transducer("exp/sherpa/encoder.onnx", "exp/sherpa/decoder.onnx",
        "exp/sherpa/joiner.onnx", "exp/sherpa/tokens.txt", model_type="nemo_transducer", feature_dim=F)

Needs the ``onnx`` extra (onnx, onnxruntime; sherpa-onnx to decode). The encoder's metadata holds what
sherpa-onnx reads (``vocab_size`` without the blank, ``subsampling_factor``, ``normalize_type``,
``pred_rnn_layers``, ``pred_hidden``, ``feat_dim``, and a ``url`` with "tdt" in it for a TDT model: that is how
sherpa tells TDT from RNN-T). ``normalize_type`` is always "": sherpa-onnx hands over its raw log filterbank and
the encoder starts with the training front end's own normalisation. A model trained with the front end of kind
"sherpa" needs nothing else (`SherpaFeatures`), so sherpa-onnx gives its training features; any other front end
gets the approximate `SherpaFeatureAdapter`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from asr_plugin.export.export_dir import export_directory, model_sha256
from asr_plugin.export.feature_adapter import SherpaFeatureAdapter, encoder_input
from asr_plugin.export.onnx_files import write_onnx, write_quantized
from asr_plugin.export.onnx_modules import SherpaDecoder, SherpaEncoder, SherpaJoiner
from asr_plugin.export.sherpa_tokens import PieceTable, sherpa_token_lines
from asr_plugin.files import write_text_atomic
from asr_plugin.losses import RNNT, TDT
from asr_plugin.models import ConformerEncoder, Joint, LSTMPredictor, Transducer

PIECES = ("encoder", "decoder", "joiner")
OPSET = 18  # the dynamo exporter's lowest; sherpa-onnx 2.0.1's onnxruntime runs it
# What sherpa-onnx 2.0.1's NeMo greedy search does (offline-transducer-greedy-search-nemo-decoder.cc): at most
# 10 tokens per frame for RNN-T, 5 for TDT. `greedy_search` with these gives its transcripts.
SHERPA_MAX_SYMBOLS = {"rnnt": 10, "tdt": 5}
# What an ONNX export made before export records holds (its weights in <piece>.onnx.data when large).
ONNX_EXPORT_FILES = ("encoder*.onnx", "decoder*.onnx", "joiner*.onnx", "*.onnx.data", "tokens.txt")


def tdt_durations(model: Transducer) -> tuple[int, ...] | None:
    """The TDT durations of `model`'s lattice (None for RNN-T); another lattice is refused by name."""
    lattice = model.lattice
    if isinstance(lattice, TDT):
        return lattice.durations
    if isinstance(lattice, RNNT):
        return None
    raise ValueError(f"lattice {type(lattice).__name__}: sherpa-onnx's NeMo transducer decodes RNN-T and TDT only")


def check_exportable(model: Transducer) -> None:
    """Raises ValueError naming the part that sherpa-onnx's NeMo transducer cannot run."""
    parts = (
        ("model", model, Transducer),
        ("encoder", getattr(model, "encoder", None), ConformerEncoder),
        ("predictor", getattr(model, "predictor", None), LSTMPredictor),
        ("joint", getattr(model, "joint", None), Joint),
    )
    for name, part, expected in parts:
        if type(part) is not expected:
            raise ValueError(
                f"{name} {type(part).__name__}: the sherpa-onnx export handles only {expected.__name__} "
                f"(sherpa-onnx's NeMo transducer runs an LSTM predictor and an add-activation-linear joint)"
            )
    if model.joint.fused_activation is None:
        raise ValueError(
            f"joint activation {type(model.joint.activation).__name__}: the export handles only "
            "Joint's own tanh/relu/gelu"
        )
    durations = tdt_durations(model)
    if durations is not None and tuple(durations) != tuple(range(len(durations))):
        raise ValueError(
            f"TDT durations {list(durations)}: sherpa-onnx skips as many frames as the best duration's "
            f"index, so only durations 0, 1, ..., D-1 export"
        )


def encoder_metadata(model: Transducer, feature_dim: int, adapted: bool = True) -> dict[str, str]:
    """The encoder.onnx metadata sherpa-onnx reads (all values as strings); `adapted`: whether the encoder
    starts with the approximate feature adapter (said in the comment)."""
    tdt = tdt_durations(model) is not None
    return {
        "vocab_size": str(model.vocab_size - 1),  # NeMo's count, without the blank
        "subsampling_factor": str(2**model.encoder.subsampling.num_layers),
        "normalize_type": "",  # sherpa's raw log filterbank: the encoder normalises as training did
        "pred_rnn_layers": str(model.predictor.num_layers),
        "pred_hidden": str(model.predictor.hidden_dim),
        "feat_dim": str(feature_dim),
        "model_type": "EncDecRNNTBPEModel",
        "model_author": "asr_plugin",
        "url": "asr_plugin-tdt" if tdt else "asr_plugin-rnnt",  # sherpa-onnx: TDT iff "tdt" is in the url
        "durations": ",".join(map(str, tdt_durations(model) or ())),
        "comment": "exported by asr_plugin.export.export_onnx; "
        + ("features adapted inside the encoder" if adapted else "trained on sherpa-onnx's own features"),
    }


@dataclass(frozen=True)
class OnnxPiece:
    """One ONNX file to write: the module, example inputs, the input and output names, and each input's dynamic
    axes ({axis: Dim}) for the dynamo exporter."""

    module: nn.Module
    args: tuple
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dynamic: tuple[dict[int, Any], ...]


def predictor_pieces(model: Transducer) -> dict[str, OnnxPiece]:
    """decoder.onnx and joiner.onnx as sherpa-onnx's NeMo transducers (offline and online alike) call them."""
    joint_dim, layers, hidden = model.joint.hidden_dim, model.predictor.num_layers, model.predictor.hidden_dim
    state = torch.zeros(layers, 2, hidden)  # batch 2: an example size of 1 would be specialised
    auto = Dim.AUTO
    return {
        "decoder": OnnxPiece(
            SherpaDecoder(model),
            (torch.zeros(2, 1, dtype=torch.int32), torch.ones(2, dtype=torch.int32), state, state.clone()),
            ("targets", "target_length", "states.1", "states.2"),
            ("decoder_output", "decoder_output_length", "states_next.1", "states_next.2"),
            ({0: auto}, {0: auto}, {1: auto}, {1: auto}),
        ),
        "joiner": OnnxPiece(
            SherpaJoiner(model),
            (torch.randn(2, joint_dim, 1), torch.randn(2, joint_dim, 1)),
            ("encoder_outputs", "decoder_outputs"),
            ("outputs",),
            ({0: auto}, {0: auto}),
        ),
    }


def write_sherpa_export(
    model: Transducer,
    encoder: OnnxPiece,
    metadata: Mapping[str, str],
    tokenizer: PieceTable,
    out_dir: str | os.PathLike,
    int8: bool,
    overwrite: bool,
    source: str | None,
) -> dict[str, Path]:
    """Writes `encoder` (with `metadata`), the model's decoder and joiner (`predictor_pieces`) and tokens.txt, and
    with `int8` their quantisation, as the directory `out_dir`, whole (`export_directory`); returns {name: path}."""
    if tokenizer.vocab_size != model.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} ids, the model {model.vocab_size}")
    lines = sherpa_token_lines(tokenizer)
    out_dir = Path(out_dir)
    names = {name: f"{name}.onnx" for name in PIECES}
    if int8:
        names.update({f"{name}.int8": f"{name}.int8.onnx" for name in PIECES})
    names["tokens"] = "tokens.txt"
    pieces = {"encoder": encoder, **predictor_pieces(model)}
    with export_directory(
        out_dir, model_sha256(model), source=source, overwrite=overwrite, legacy_patterns=ONNX_EXPORT_FILES
    ) as staging:
        for name, piece in pieces.items():
            piece_metadata = metadata if name == "encoder" else {}
            write_onnx(
                staging / names[name],
                piece.module,
                piece.args,
                piece.inputs,
                piece.outputs,
                piece.dynamic,
                piece_metadata,
                OPSET,
            )
            if int8:  # sherpa-onnx's own NeMo scripts: unsigned weights for the encoder, signed for the others
                weights = "QUInt8" if name == "encoder" else "QInt8"
                write_quantized(staging / names[name], staging / names[f"{name}.int8"], weights, piece_metadata)
        write_text_atomic(staging / names["tokens"], "\n".join(lines) + "\n")
    return {name: out_dir / file_name for name, file_name in names.items()}


def export_onnx(
    model: Transducer,
    frontend_spec: Mapping[str, Any],
    tokenizer: PieceTable,
    out_dir: str | os.PathLike,
    int8: bool = False,
    overwrite: bool = False,
    source: str | None = None,
) -> dict[str, Path]:
    """Writes encoder.onnx, decoder.onnx, joiner.onnx and tokens.txt (and with `int8` also the *.int8.onnx
    files, onnxruntime's dynamic quantisation) as the directory `out_dir`, whole (`export_directory`: written
    aside and swapped in, with ``export_record.json`` naming the model's hash and `source`, nothing of an
    earlier export left beside them); returns {name: path}.

    Args:
        model: the transducer (put in eval mode); `check_exportable` says which ones export.
        frontend_spec: the front-end spec of its training features (a checkpoint's record). Kind "sherpa":
            sherpa-onnx computes them (the encoder normalises them as the front end does, `SherpaFeatures`);
            any other kind but "sherpa_online" (the online recogniser's features: `export_onnx_streaming`):
            the encoder turns sherpa-onnx's into them approximately (`SherpaFeatureAdapter`).
        tokenizer: its tokenizer (ids with blank 0, ``id_to_piece``).
        source: where the model was loaded from (a checkpoint or .nemo path), recorded for people.
    Raises:
        ValueError naming what cannot be exported, or files in `out_dir` that no export wrote; FileExistsError
        when `out_dir` holds an export and not `overwrite`.
    """
    check_exportable(model)
    adapter = encoder_input(frontend_spec)
    model = model.eval()
    feature_dim = adapter.sherpa_bins
    metadata = encoder_metadata(model, feature_dim, adapted=isinstance(adapter, SherpaFeatureAdapter))
    frames = max(64, 4 * model.encoder.subsampling.min_input_length())
    features, lengths = torch.randn(2, feature_dim, frames), torch.tensor([frames, frames - 3])
    auto = Dim.AUTO
    encoder = OnnxPiece(
        SherpaEncoder(model, adapter),
        (features, lengths),
        ("audio_signal", "length"),
        ("outputs", "encoded_lengths"),
        ({0: auto, 2: auto}, {0: auto}),
    )
    return write_sherpa_export(model, encoder, metadata, tokenizer, out_dir, int8, overwrite, source)
