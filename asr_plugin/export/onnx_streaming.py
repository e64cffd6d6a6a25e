"""ONNX export for sherpa-onnx's online (streaming) NeMo transducer: a cache-aware streaming model, one lookahead
per directory.

    export_onnx_streaming(model, frontend_spec, tokenizer, "exp/online", att_context_size=[32, 3], int8=True)
    recognizer = sherpa_onnx.OnlineRecognizer.from_transducer("exp/online/tokens.txt", "exp/online/encoder.onnx",
        "exp/online/decoder.onnx", "exp/online/joiner.onnx", model_type="nemo_transducer")

What sherpa-onnx 2.0.1 reads (``online-transducer-nemo-model.cc``, ``online-recognizer-transducer-nemo-impl.h``,
``online-transducer-greedy-search-nemo-decoder.cc``, ``online-recognizer-impl.cc``; the keys and messages are in
the installed binary too):

- it takes the online NeMo path when decoder.onnx has more than one output (ours has four);
- encoder.onnx: inputs, by position, (B, F, W) features, (B,) int64 frames (always W), cache_last_channel
  (B, L, C, D), cache_last_time (B, L, D, K - 1 + slots: the carried features follow the convolution's frames),
  cache_last_channel_len (B,) int64; outputs, by position,
  (B, H, T) frames, (B,) lengths (dropped unread: sherpa decodes all T frames), then the three next caches.
  F is read from the input's static shape. Its initial caches are zeros of (1, dim1, dim2, dim3) from the
  metadata and a length of 0; streams are batched by concatenating their caches along the first axis;
- metadata: ``vocab_size`` (without the blank), ``window_size`` (W), ``chunk_shift``, ``subsampling_factor``,
  ``normalize_type`` (stored, never applied online), ``pred_rnn_layers``, ``pred_hidden``,
  ``cache_last_channel_dim1..3``, ``cache_last_time_dim1..3``;
- decoder.onnx and joiner.onnx as the offline NeMo path calls them (`asr_plugin.export.onnx_export`), the greedy
  search capped at 10 tokens a frame; tokens.txt with ``<blk>`` last.

sherpa-onnx runs window k on feature frames [k chunk_shift, k chunk_shift + W) once more than its end is ready
(``IsReady``: processed + W < ready), with no padding at the start and none at the end (``InputFinished`` only
flushes the filterbank's last frames): the frames after the last whole window are decoded only when the
application appends silence (`sherpa_online_decode.tail_padding_samples`), as sherpa-onnx's examples and programs
do. `SherpaStreamingEncoder` turns these windows into the step API's steps on the stream's features from its first
frame, carrying the 2f feature frames a step reads before its window in ``cache_last_time`` (its module
docstring): a stream needs no silence before it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch.export import Dim

from asr_plugin.export.export_dir import export_directory, model_sha256
from asr_plugin.export.onnx_export import (
    OnnxPiece,
    check_exportable,
    encoder_metadata,
    tdt_durations,
    write_sherpa_export,
)
from asr_plugin.export.sherpa_tokens import PieceTable
from asr_plugin.export.streaming_modules import FeatureCarry, SherpaStreamingEncoder
from asr_plugin.frontend.spec import complete_frontend_spec
from asr_plugin.models import StreamingSetup, Transducer

ONLINE_FRONTEND = "sherpa_online"  # the only features sherpa-onnx's online NeMo recogniser computes
# cache_last_channel_len is the only position a window carries; below 2 frames it cannot tell a stream's third
# window from its second (`streaming_modules.preceding_features`)
MIN_LEFT_CACHE = 2


def lookahead_dir_name(att_context_size: tuple[int, int] | list[int]) -> str:
    """The subdirectory name of one lookahead's export: "<left>_<right>"."""
    left, right = att_context_size
    return f"{left}_{right}"


def check_streaming_exportable(
    model: Transducer, frontend_spec: Mapping[str, Any], att_context_size: list[int] | tuple[int, int] | None
) -> StreamingSetup:
    """The `StreamingSetup` of `att_context_size` (None: the model's default context); ValueError naming what
    sherpa-onnx's online recogniser cannot run: a part `check_exportable` refuses, a TDT lattice, a front end
    other than "sherpa_online", a context the model lacks or that does not stream (a full-context one), a
    model that cannot stream with caches, a left context under `MIN_LEFT_CACHE` frames."""
    check_exportable(model)
    durations = tdt_durations(model)
    if durations is not None:
        raise ValueError(
            f"TDT lattice (durations {list(durations)}): sherpa-onnx's online NeMo transducer decodes RNN-T only "
            "(its greedy search, online-transducer-greedy-search-nemo-decoder.cc, has no duration head)"
        )
    spec = complete_frontend_spec(frontend_spec)
    if spec["kind"] != ONLINE_FRONTEND:
        raise ValueError(
            f"front end of kind {spec['kind']!r}: sherpa-onnx's online recogniser computes only the features of "
            f"kind {ONLINE_FRONTEND!r} (Hann window, 0-8000 Hz, no normalisation), and no adapter makes others "
            f"exact; train the model with data.frontend={ONLINE_FRONTEND} (experiment=mini_streaming does)"
        )
    bins = spec["options"]["num_mel_bins"]
    if bins != model.encoder.input_dim:
        raise ValueError(f"front end has {bins} mel bins, the encoder takes {model.encoder.input_dim}")
    context = model.encoder.checked_context(att_context_size)  # ValueError naming the model's contexts
    if context[1] < 0:
        raise ValueError(
            f"att_context_size={list(context)} is full context (an unlimited right context): sherpa-onnx's online "
            "recogniser runs cache-aware streaming models only; export this context offline (without --streaming), "
            f"or choose one of the model's streaming contexts {[list(c) for c in model.encoder.streaming_contexts]}"
        )
    setup = model.encoder.streaming_setup(context)  # ValueError: non-causal subsampling or convolution, ...
    if setup.last_channel_cache_size < MIN_LEFT_CACHE:
        raise ValueError(
            f"att_context_size={list(context)} keeps {setup.last_channel_cache_size} encoder frames of left context: "
            f"sherpa-onnx's windows tell a stream's position only by cache_last_channel_len, which needs at least "
            f"{MIN_LEFT_CACHE}"
        )
    return setup


def streaming_metadata(model: Transducer, setup: StreamingSetup) -> dict[str, str]:
    """The encoder.onnx metadata of sherpa-onnx's online NeMo transducer (all values strings), and the context's."""
    encoder = model.encoder
    layers, d_model = len(encoder.layers), encoder.output_dim
    carry = FeatureCarry(setup, encoder.input_dim, layers, d_model)
    metadata = encoder_metadata(model, encoder.input_dim, adapted=False)
    metadata.update(
        {
            "window_size": str(carry.window_size),
            "chunk_shift": str(carry.chunk_shift),
            "cache_last_channel_dim1": str(layers),
            "cache_last_channel_dim2": str(setup.last_channel_cache_size),
            "cache_last_channel_dim3": str(d_model),
            "cache_last_time_dim1": str(layers),
            "cache_last_time_dim2": str(d_model),
            "cache_last_time_dim3": str(carry.time_cache_frames),
            "att_context_size": ",".join(map(str, setup.att_context_size)),
            "att_context_style": encoder.att_context_style,
            "valid_out_len": str(setup.valid_out_len),
            "carried_feature_frames": str(carry.carried_frames),
            "comment": "exported by asr_plugin.export.export_onnx_streaming for sherpa-onnx's online recogniser; "
            "trained on its features (sherpa_online); cache_last_time carries carried_feature_frames feature "
            "frames after its convolution frames; give a stream window_size + chunk_shift x 10 ms of silence "
            "after the audio",
        }
    )
    return metadata


def streaming_encoder_piece(model: Transducer, setup: StreamingSetup) -> OnnxPiece:
    """encoder.onnx of one context: NeMo's input and output names, every axis static but the batch."""
    encoder = model.encoder
    layers, d_model, batch = len(encoder.layers), encoder.output_dim, 3  # an example batch of 1 would be specialised
    carry = FeatureCarry(setup, encoder.input_dim, layers, d_model)
    cache_len = torch.tensor([0, setup.valid_out_len, setup.last_channel_cache_size])  # a first, second, later window
    example = (
        torch.randn(batch, encoder.input_dim, carry.window_size),
        torch.full((batch,), carry.window_size),
        torch.randn(layers, batch, setup.last_channel_cache_size, d_model).transpose(0, 1).contiguous(),
        torch.randn(layers, batch, d_model, carry.time_cache_frames).transpose(0, 1).contiguous(),
        cache_len,
    )
    rows = {0: Dim.AUTO}
    return OnnxPiece(
        SherpaStreamingEncoder(model, setup),
        example,
        ("audio_signal", "length", "cache_last_channel", "cache_last_time", "cache_last_channel_len"),
        (
            "outputs",
            "encoded_lengths",
            "cache_last_channel_next",
            "cache_last_time_next",
            "cache_last_channel_next_len",
        ),
        (rows, rows, rows, rows, rows),
    )


def export_onnx_streaming(
    model: Transducer,
    frontend_spec: Mapping[str, Any],
    tokenizer: PieceTable,
    out_dir: str | os.PathLike,
    att_context_size: list[int] | tuple[int, int] | None = None,
    int8: bool = False,
    overwrite: bool = False,
    source: str | None = None,
) -> dict[str, Path]:
    """Writes encoder.onnx (one attention context: `att_context_size`, None for the model's default), decoder.onnx,
    joiner.onnx and tokens.txt for ``sherpa_onnx.OnlineRecognizer`` (and with `int8` the *.int8.onnx files) as
    the directory `out_dir`, whole (`export_directory`, as `export_onnx`); returns {name: path}.

    Raises ValueError naming what sherpa-onnx's online recogniser cannot run (`check_streaming_exportable`) or
    files in `out_dir` that no export wrote; FileExistsError when `out_dir` holds an export and not `overwrite`.
    """
    model = model.eval()
    setup = check_streaming_exportable(model, frontend_spec, att_context_size)
    encoder = streaming_encoder_piece(model, setup)
    return write_sherpa_export(
        model, encoder, streaming_metadata(model, setup), tokenizer, out_dir, int8, overwrite, source
    )


def export_onnx_every_lookahead(
    model: Transducer,
    frontend_spec: Mapping[str, Any],
    tokenizer: PieceTable,
    out_dir: str | os.PathLike,
    int8: bool = False,
    overwrite: bool = False,
    source: str | None = None,
) -> dict[tuple[int, int], dict[str, Path]]:
    """`export_onnx_streaming` of each of the model's streaming contexts (``model.encoder.streaming_contexts``) into
    ``out_dir/<left>_<right>/``; returns {context: {name: path}}. All are checked before any is written, and the
    set is written whole (`export_directory`: staged, then swapped in as one, its record at the top)."""
    contexts = model.encoder.streaming_contexts
    if not contexts:
        raise ValueError(
            f"the model's contexts {[list(c) for c in model.encoder.att_context_sizes]} are all full context: "
            "nothing streams"
        )
    for context in contexts:
        check_streaming_exportable(model, frontend_spec, context)
    with export_directory(out_dir, model_sha256(model), source=source, overwrite=overwrite) as staging:
        exports = {
            context: export_onnx_streaming(
                model,
                frontend_spec,
                tokenizer,
                staging / lookahead_dir_name(context),
                context,
                int8=int8,
                source=source,
            )
            for context in contexts
        }
    return {
        context: {name: Path(out_dir) / lookahead_dir_name(context) / path.name for name, path in files.items()}
        for context, files in exports.items()
    }
