"""Greedy and beam search through the exported encoder/predictor/joint give the eager model's tokens; the export
records the checkpoint's greedy ``max_symbols_per_frame``."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
import torch
from built_once import built_once, copy_of
from tiny_models import TINY_SIZES, tiny_transducer

from asr_plugin.decoding import beam_search, greedy_search
from asr_plugin.export import ExportedTransducer, export_transducer
from asr_plugin.export.export_dir import RECORD_NAME

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bare_export(tmp_path_factory) -> Path:
    """The export of the bare model `tiny_transducer(seed=3)` (no decoding settings), made once per test run (a
    torch.export of the three pieces is seconds of CPU); shared: tests copy it before changing it."""
    built = built_once(
        tmp_path_factory,
        "torch_export_of_tiny_transducer_3",
        lambda directory: export_transducer(tiny_transducer(seed=3), directory / "export", feature_dim=16),
    )
    return built / "export"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_exported_pieces_decode_like_the_eager_model(tmp_path, bare_export) -> None:
    model = tiny_transducer(seed=3)
    pieces = ["encoder.pt2", "joint.pt2", "predictor.pt2", "transducer.json"]
    assert sorted(p.name for p in bare_export.iterdir()) == sorted([*pieces, RECORD_NAME])
    exported = ExportedTransducer.load(copy_of(bare_export, tmp_path / "export"))
    torch.manual_seed(1)
    # Shapes unlike the export example (batch 2, 64 frames): the axes really are dynamic.
    features, lengths = torch.randn(5, 90, 16), torch.tensor([90, 71, 40, 17, 88])
    with torch.no_grad():
        eager_out, eager_lengths = model.encode(features, lengths)
        exported_out, exported_lengths = exported.encode(features, lengths)
        eager_proj = model.joint.project_encoder(eager_out)
    assert torch.equal(exported_lengths, eager_lengths)
    for b, length in enumerate(eager_lengths.tolist()):  # padded frames may differ; nothing reads them
        torch.testing.assert_close(exported_out[b, :length], eager_proj[b, :length], atol=1e-5, rtol=1e-5)
    eager = greedy_search(model, eager_out, eager_lengths, max_symbols_per_frame=3)
    ported = greedy_search(exported, exported_out, exported_lengths, max_symbols_per_frame=3)
    assert sum(len(h.tokens) for h in eager) > 5
    assert [h.tokens for h in ported] == [h.tokens for h in eager]
    assert [h.score for h in ported] == pytest.approx([h.score for h in eager], abs=1e-4)
    beam_eager = beam_search(model, eager_out, eager_lengths, beam=3)
    beam_ported = beam_search(exported, exported_out, exported_lengths, beam=3)
    assert [h.tokens for h in beam_ported] == [h.tokens for h in beam_eager]
    with pytest.raises(FileExistsError):
        export_transducer(model, tmp_path / "export", feature_dim=16)
    with pytest.raises(ValueError, match="feature frames"):
        exported.encode(features[:, :5], torch.tensor([5] * 5))


def save_training_checkpoint(path: Path, model, **hyper_parameters) -> Path:
    """A TransducerModule-layout checkpoint of `model` (what scripts/export_model.py reads)."""
    torch.save(
        {
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "epoch": 0,
            "global_step": 1,
            "hyper_parameters": {
                "model": {"_target_": "asr_plugin.models.build_transducer", "vocab_size": 7, **TINY_SIZES},
                **hyper_parameters,
            },
        },
        path,
    )
    return path


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_export_model_records_the_checkpoints_max_symbols_per_frame(tmp_path, bare_export) -> None:
    export_model = runpy.run_path(str(REPO_ROOT / "scripts" / "export_model.py"))["main"]
    model = tiny_transducer(seed=3)
    checkpoint = save_training_checkpoint(tmp_path / "run.ckpt", model, max_symbols_per_frame=7)
    assert export_model(["--checkpoint", str(checkpoint), "--out", str(tmp_path / "export")]) == 0
    record = json.loads((tmp_path / "export" / "transducer.json").read_text(encoding="utf-8"))
    assert record["max_symbols_per_frame"] == 7
    assert ExportedTransducer.load(tmp_path / "export").max_symbols_per_frame == 7
    # a checkpoint without the setting: the training module's default (10), which eval.py decodes it with
    older = save_training_checkpoint(tmp_path / "older.ckpt", model)
    assert export_model(["--checkpoint", str(older), "--out", str(tmp_path / "older")]) == 0
    assert ExportedTransducer.load(tmp_path / "older").max_symbols_per_frame == 10
    # a bare model has no decoding settings: nothing is recorded
    assert ExportedTransducer.load(bare_export).max_symbols_per_frame is None


def test_exports_without_the_record_load_and_a_bad_value_is_refused_naming_the_file(tmp_path, bare_export) -> None:
    model = tiny_transducer(seed=3)
    metadata = copy_of(bare_export, tmp_path / "export") / "transducer.json"
    record = json.loads(metadata.read_text(encoding="utf-8"))
    del record["max_symbols_per_frame"]  # as exports written before it was recorded
    metadata.write_text(json.dumps(record), encoding="utf-8")
    assert ExportedTransducer.load(tmp_path / "export").max_symbols_per_frame is None
    metadata.write_text(json.dumps({**record, "max_symbols_per_frame": 0}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"transducer\.json: malformed export metadata .*max_symbols_per_frame"):
        ExportedTransducer.load(tmp_path / "export")
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        export_transducer(model, tmp_path / "other", feature_dim=16, max_symbols_per_frame=True)
