"""Greedy and beam search through the exported encoder/predictor/joint give the eager model's tokens."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_transducer

from asr_plugin.decoding import greedy_search, modified_beam_search
from asr_plugin.export import ExportedTransducer, export_transducer


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_exported_pieces_decode_like_the_eager_model(tmp_path) -> None:
    model = tiny_transducer(seed=3)
    paths = export_transducer(model, tmp_path / "export", feature_dim=16)
    assert sorted(p.name for p in paths.values()) == ["encoder.pt2", "joint.pt2", "predictor.pt2", "transducer.json"]
    exported = ExportedTransducer.load(tmp_path / "export")
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
    beam_eager = modified_beam_search(model, eager_out, eager_lengths, beam=3)
    beam_ported = modified_beam_search(exported, exported_out, exported_lengths, beam=3)
    assert [h.tokens for h in beam_ported] == [h.tokens for h in beam_eager]
    with pytest.raises(FileExistsError):
        export_transducer(model, tmp_path / "export", feature_dim=16)
    with pytest.raises(ValueError, match="feature frames"):
        exported.encode(features[:, :5], torch.tensor([5] * 5))
