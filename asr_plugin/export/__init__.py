"""Export for inference: three ``torch.export`` programs, or ONNX files that sherpa-onnx decodes.

export_transducer(model, "exp/export", feature_dim=80)      # encoder.pt2, predictor.pt2, joint.pt2, transducer.json
exported = ExportedTransducer.load("exp/export")
hyps = greedy_search(exported, *exported.encode(features, lengths))

export_onnx(model, frontend_spec, tokenizer, "exp/sherpa", int8=True)   # encoder/decoder/joiner.onnx, tokens.txt
export_onnx_streaming(model, frontend_spec, tokenizer, "exp/online", att_context_size=[32, 3])  # sherpa-onnx online
"""

from __future__ import annotations

import os
from pathlib import Path

from asr_plugin.export.export_dir import model_sha256
from asr_plugin.export.modules import EncoderPiece, JointPiece, PredictorPiece
from asr_plugin.export.onnx_export import check_exportable, export_onnx
from asr_plugin.export.onnx_streaming import export_onnx_every_lookahead, export_onnx_streaming
from asr_plugin.export.programs import ExportMetadata, export_pieces, load_pieces, save_pieces
from asr_plugin.export.runtime import ExportedTransducer
from asr_plugin.models import Transducer


def export_transducer(
    model: Transducer,
    out_dir: str | os.PathLike,
    feature_dim: int,
    overwrite: bool = False,
    max_symbols_per_frame: int | None = None,
    source: str | None = None,
) -> dict[str, Path]:
    """Exports and saves the three pieces of `model` as the directory `out_dir` (whole: `save_pieces`); returns
    {piece or "metadata": path}. `max_symbols_per_frame` (a checkpoint's greedy cap) is recorded in
    transducer.json (`ExportMetadata`), `source` (where the model was loaded from) in export_record.json."""
    programs, meta = export_pieces(model, feature_dim, max_symbols_per_frame)
    return save_pieces(programs, meta, out_dir, overwrite=overwrite, model_digest=model_sha256(model), source=source)


__all__ = [
    "EncoderPiece",
    "ExportMetadata",
    "ExportedTransducer",
    "JointPiece",
    "PredictorPiece",
    "check_exportable",
    "export_onnx",
    "export_onnx_every_lookahead",
    "export_onnx_streaming",
    "export_pieces",
    "export_transducer",
    "load_pieces",
    "save_pieces",
]
