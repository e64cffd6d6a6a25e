"""Exporting the three pieces with ``torch.export`` (dynamic batch, frames and hypotheses) and saving them."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.export import Dim, ExportedProgram

from asr_plugin.export.export_dir import export_directory, tensors_sha256
from asr_plugin.export.modules import EncoderPiece, JointPiece, PredictorPiece
from asr_plugin.files import write_atomic, write_text_atomic
from asr_plugin.models import Transducer

PIECES = ("encoder", "predictor", "joint")
METADATA_FILE = "transducer.json"
PT2_EXPORT_FILES = ("*.pt2", METADATA_FILE)  # what an export made before export records holds


@dataclass(frozen=True)
class ExportMetadata:
    """What a runtime needs besides the programs (saved as transducer.json)."""

    vocab_size: int
    blank_id: int
    feature_dim: int
    joint_dim: int
    predictor_layers: int
    predictor_dim: int
    min_feature_frames: int
    # the model's lattice record (greedy search runs its step); exports written before it was recorded: RNN-T
    lattice: dict[str, Any] = field(default_factory=lambda: {"kind": "rnnt"})
    # the greedy cap the model was validated with (a checkpoint's decoding settings), so that a runtime decodes
    # as eval.py does; None: not known (a bare model, or an export written before it was recorded)
    max_symbols_per_frame: int | None = None

    def __post_init__(self) -> None:
        symbols = self.max_symbols_per_frame
        if symbols is not None and (isinstance(symbols, bool) or not isinstance(symbols, int) or symbols < 1):
            raise ValueError(f"max_symbols_per_frame must be a positive integer or None, got {symbols!r}")


def export_pieces(
    model: Transducer, feature_dim: int, max_symbols_per_frame: int | None = None
) -> tuple[dict[str, ExportedProgram], ExportMetadata]:
    """``torch.export`` programs of the encoder, predictor step and joint of `model` (put in eval mode).

    Args:
        feature_dim: F, the model's input feature size (``model.input_dim`` of the config).
        max_symbols_per_frame: the greedy cap to record (a checkpoint's ``CheckpointInfo.decoding``); None
            records none.
    Returns:
        {"encoder", "predictor", "joint"} programs (see `asr_plugin.export.modules` for their
        signatures; every batch/frame/hypothesis axis is dynamic) and the metadata.
    """
    model = model.eval()
    meta = ExportMetadata(
        vocab_size=model.vocab_size,
        blank_id=model.blank_id,
        feature_dim=feature_dim,
        joint_dim=model.joint.hidden_dim,
        predictor_layers=model.predictor.num_layers,
        predictor_dim=model.predictor.hidden_dim,
        min_feature_frames=model.encoder.subsampling.min_input_length(),
        lattice=model.lattice.record(),
        max_symbols_per_frame=max_symbols_per_frame,
    )
    device = next(model.parameters()).device
    frames = max(64, 4 * meta.min_feature_frames)  # the example size must not be special (0/1) for Dim.AUTO
    features = torch.randn(2, frames, feature_dim, device=device)
    lengths = torch.tensor([frames, frames - 3], device=device)
    tokens = torch.tensor([meta.blank_id, 1], device=device)
    state = torch.zeros(meta.predictor_layers, 2, meta.predictor_dim, device=device)
    projected = torch.randn(2, meta.joint_dim, device=device)
    auto = Dim.AUTO
    with torch.no_grad(), warnings.catch_warnings():
        # nn.LSTM re-assigns its flat weight list while tracing; the program is unaffected.
        warnings.filterwarnings("ignore", message=".*_flat_weights.*")
        programs = {
            "encoder": torch.export.export(
                EncoderPiece(model), (features, lengths), dynamic_shapes=({0: auto, 1: auto}, {0: auto})
            ),
            "predictor": torch.export.export(
                PredictorPiece(model), (tokens, state, state.clone()), dynamic_shapes=({0: auto}, {1: auto}, {1: auto})
            ),
            "joint": torch.export.export(
                JointPiece(model), (projected, projected.clone()), dynamic_shapes=({0: auto}, {0: auto})
            ),
        }
    return programs, meta


def save_pieces(
    programs: dict[str, ExportedProgram],
    meta: ExportMetadata,
    out_dir: str | os.PathLike,
    overwrite: bool = False,
    model_digest: str | None = None,
    source: str | None = None,
) -> dict[str, Path]:
    """Writes <out_dir>/{encoder,predictor,joint}.pt2 and transducer.json as the directory `out_dir`, whole
    (`asr_plugin.export.export_dir.export_directory`: an existing export is replaced only with `overwrite`, and
    ``export_record.json`` names `model_digest`, the exported model's `model_sha256` (default: of the programs'
    own weights), and `source`)."""
    out_dir = Path(out_dir)
    names = {name: f"{name}.pt2" for name in PIECES}
    names["metadata"] = METADATA_FILE
    if model_digest is None:
        model_digest = tensors_sha256(
            {
                f"{piece}.{name}": tensor
                for piece, program in programs.items()
                for name, tensor in program.state_dict.items()
            }
        )
    with export_directory(
        out_dir, model_digest, source=source, overwrite=overwrite, legacy_patterns=PT2_EXPORT_FILES
    ) as staging:
        for name in PIECES:
            write_atomic(staging / names[name], lambda tmp, program=programs[name]: torch.export.save(program, tmp))
        write_text_atomic(staging / METADATA_FILE, json.dumps(asdict(meta), indent=1))
    return {name: out_dir / file_name for name, file_name in names.items()}


def load_pieces(export_dir: str | os.PathLike) -> tuple[dict[str, torch.nn.Module], ExportMetadata]:
    """The callable modules of a directory written by `save_pieces`, and its metadata."""
    export_dir = Path(export_dir)
    meta_path = export_dir / METADATA_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} does not exist; is {export_dir} an export directory?")
    try:
        meta = ExportMetadata(**json.loads(meta_path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError, ValueError) as err:
        raise ValueError(f"{meta_path}: malformed export metadata ({err})") from None
    modules = {name: torch.export.load(export_dir / f"{name}.pt2").module() for name in PIECES}
    return modules, meta
