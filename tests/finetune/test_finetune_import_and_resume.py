"""Fine-tuning continues from a few-step checkpoint; torchaudio RNNT import maps what matches exactly."""

from __future__ import annotations

import pytest
import torch
import torchaudio
from test_finetune_loading import lightning_checkpoint, rnnt_loss, save
from tiny_models import tiny_transducer

from asr_plugin.finetune import apply_finetune
from asr_plugin.formats.torchaudio_rnnt import import_torchaudio_rnnt
from asr_plugin.models import build_transducer


def test_finetuning_continues_from_the_checkpoint_loss(tmp_path) -> None:
    torch.manual_seed(0)
    features, lengths = torch.randn(3, 48, 16), torch.tensor([48, 40, 33])
    targets, target_lengths = torch.tensor([[1, 2, 3, 4], [5, 6, 1, 0], [2, 2, 0, 0]]), torch.tensor([4, 3, 2])
    batch = (features, lengths, targets, target_lengths)
    model = tiny_transducer(seed=10, dropout=0.0, predictor_dropout=0.0).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        optimizer.zero_grad()
        loss = rnnt_loss(model, *batch)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():  # eval mode: batch norms use their (checkpointed) running statistics
        last = float(rnnt_loss(model.eval(), *batch))
    assert last < losses[0] - 0.5, "a few steps should lower the loss visibly"
    path = save(lightning_checkpoint(model), tmp_path / "epoch=0-step=15.ckpt")

    fresh = tiny_transducer(seed=11, dropout=0.0, predictor_dropout=0.0).train()
    with torch.no_grad():
        fresh_loss = float(rnnt_loss(fresh.eval(), *batch))
    apply_finetune(fresh, {"path": path, "freeze_encoder_layers": -1})
    with torch.no_grad():
        resumed = float(rnnt_loss(fresh.eval(), *batch))
    assert resumed == pytest.approx(last, abs=1e-4)
    assert abs(fresh_loss - last) > 0.5
    # One more step on the loaded model: the loss keeps going down and the frozen encoder stays put.
    encoder_before = {k: v.clone() for k, v in fresh.encoder.state_dict().items()}
    optimizer = torch.optim.AdamW([p for p in fresh.parameters() if p.requires_grad], lr=3e-3)
    rnnt_loss(fresh.train(), *batch).backward()
    optimizer.step()
    with torch.no_grad():
        assert float(rnnt_loss(fresh.eval(), *batch)) < resumed
    for key, value in fresh.encoder.state_dict().items():
        assert torch.equal(value, encoder_before[key]), key


def torchaudio_rnnt(lstm_layer_norm: bool) -> torch.nn.Module:
    """A small randomly initialised torchaudio Emformer RNN-T (7 symbols, blank last; LSTM size = embedding size)."""
    torch.manual_seed(0)
    return torchaudio.models.emformer_rnnt_model(
        input_dim=16,
        encoding_dim=10,
        num_symbols=7,
        segment_length=4,
        right_context_length=0,
        time_reduction_input_dim=8,
        time_reduction_stride=2,
        transformer_num_heads=2,
        transformer_ffn_dim=16,
        transformer_num_layers=1,
        transformer_dropout=0.0,
        transformer_activation="relu",
        transformer_left_context_length=0,
        transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise",
        transformer_tanh_on_mem=False,
        symbol_embedding_dim=8,
        num_lstm_layers=2,
        lstm_layer_norm=lstm_layer_norm,
        lstm_layer_norm_epsilon=1e-5,
        lstm_dropout=0.0,
    ).eval()


def ours_for_torchaudio() -> torch.nn.Module:
    return tiny_transducer(
        vocab_size=7,
        predictor_embed_dim=8,
        predictor_dim=8,
        predictor_layers=2,
        joint_dim=10,
        joint_activation="relu",
    )


def test_torchaudio_rnnt_import_reproduces_predictor_lstm_and_joiner(tmp_path) -> None:
    source = torchaudio_rnnt(lstm_layer_norm=False)
    imported = import_torchaudio_rnnt(source.state_dict())
    assert set(imported.state_dict) == {
        "predictor.embedding.weight",
        "joint.output.weight",
        "joint.output.bias",
        *(f"predictor.lstm.{name}_l{i}" for i in range(2) for name in ("weight_ih", "bias_ih", "weight_hh", "bias_hh")),
    }
    assert all(
        k.startswith(("transcriber.", "predictor.linear.", "predictor.output_layer_norm."))
        for k in imported.not_imported
    )
    model = ours_for_torchaudio()
    loaded = apply_finetune(model, {"path": save(source.state_dict(), tmp_path / "ta.pt")})
    assert loaded == set(imported.state_dict)

    # Predictor: torchaudio's LSTM stack (before its output projection) equals our LSTM outputs,
    # with torchaudio id k (< blank 6) fed as our id k + 1 and its blank 6 as our 0.
    ta_tokens = torch.tensor([[6, 0, 3, 5, 1]])
    ours_tokens = torch.where(ta_tokens == 6, 0, ta_tokens + 1)
    with torch.no_grad():
        x = source.predictor.input_layer_norm(source.predictor.embedding(ta_tokens.T))  # (U, B, E)
        for layer in source.predictor.lstm_layers:
            x, _ = layer(x, None)
        expected = x.transpose(0, 1)  # (B, U, H)
        ours, _ = model.predictor.lstm(model.predictor.embedding(ours_tokens))
        torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)
        # Joiner: relu(source + target) -> linear, rows reordered blank-first.
        enc, pred = torch.randn(3, 10), torch.randn(3, 10)
        lengths = torch.tensor([3])
        ta_logits = source.joiner(enc[None], lengths, pred[None], lengths)[0][0].diagonal(dim1=0, dim2=1).T  # (3, V)
        ours_logits = model.joint.combine(enc, pred)  # (3, V)
        torch.testing.assert_close(ours_logits[:, 0], ta_logits[:, 6])
        torch.testing.assert_close(ours_logits[:, 1:], ta_logits[:, :6])


def test_torchaudio_layer_norm_lstm_is_reported_not_faked() -> None:
    source = torchaudio_rnnt(lstm_layer_norm=True)
    imported = import_torchaudio_rnnt(source.state_dict())
    assert not any(k.startswith("predictor.lstm.") for k in imported.state_dict)
    reasons = {v for k, v in imported.not_imported.items() if k.startswith("predictor.lstm_layers.")}
    assert reasons and all("layer-normalised LSTM" in r for r in reasons)
    assert "predictor.embedding.weight" in imported.state_dict
    model = ours_for_torchaudio()
    assert model.predictor.lstm.weight_ih_l0.shape == (32, 8)
    build_transducer(7)  # the default sizes build as well (no import needed)
    with pytest.raises(ValueError, match="not a torchaudio RNNT"):
        import_torchaudio_rnnt({"x": torch.zeros(1)})
