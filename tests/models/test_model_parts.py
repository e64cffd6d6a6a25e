"""Shapes, exact lengths and step/forward consistency of the model parts."""

import pytest
import torch
from tiny_models import tiny_transducer

from asr_plugin.models import ConformerEncoder, Conv2dSubsampling, Joint, LSTMPredictor


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_subsampling_lengths_match_tensor(factor):
    sub = Conv2dSubsampling(80, 32, factor=factor)
    for length in range(sub.min_input_length(), 60):
        out, out_len = sub(torch.randn(1, length, 80), torch.tensor([length]))
        assert out.shape == (1, int(out_len), 32), length


def test_subsampling_rejects_bad_factor():
    with pytest.raises(ValueError, match="power of two"):
        Conv2dSubsampling(80, 32, factor=3)


def test_encoder_variable_lengths_and_padding_invariance():
    torch.manual_seed(0)
    enc = ConformerEncoder(d_model=32, num_layers=2, num_heads=2, ffn_dim=64, conv_kernel_size=5, dropout=0.0).eval()
    feats = torch.randn(2, 50, 80)
    out, lengths = enc(feats, torch.tensor([50, 30]))
    assert out.shape == (2, 11, 32) and lengths.tolist() == [11, 6]
    alone, _ = enc(feats[1:, :30], torch.tensor([30]))
    torch.testing.assert_close(out[1, :6], alone[0], atol=1e-5, rtol=1e-5)


def test_encoder_names_too_short_utterance():
    enc = ConformerEncoder(d_model=32, num_layers=1, num_heads=2, ffn_dim=64)
    with pytest.raises(ValueError, match="utterance 1 has 3 feature frames"):
        enc(torch.randn(2, 20, 80), torch.tensor([20, 3]))


def test_predictor_step_matches_forward():
    torch.manual_seed(0)
    pred = LSTMPredictor(vocab_size=10, embed_dim=8, hidden_dim=16, num_layers=2, dropout=0.0).eval()
    targets = torch.tensor([[3, 5, 7]])
    full = pred(targets)  # (1, 4, 16)
    state = None
    tokens = torch.tensor([0])
    for u in range(4):
        out, state = pred.step(tokens, state)
        torch.testing.assert_close(out[0], full[0, u], atol=1e-6, rtol=1e-6)
        if u < 3:
            tokens = targets[:, u]


def test_joint_contract_and_decomposition():
    joint = Joint(encoder_dim=12, predictor_dim=8, joint_dim=16, vocab_size=5)
    enc, pred = torch.randn(3, 7, 12), torch.randn(3, 4, 8)
    out = joint(enc, pred)
    assert out.shape == (3, 7, 4, 5)
    step = joint.combine(joint.project_encoder(enc[:, 2]), joint.project_predictor(pred[:, 1]))
    torch.testing.assert_close(step, out[:, 2, 1])


def test_joint_rejects_unknown_activation():
    with pytest.raises(ValueError, match="activation='swish'"):
        Joint(4, 4, 4, 3, activation="swish")


def test_transducer_passes_encoder_lengths_to_loss():
    model = tiny_transducer(input_dim=80, predictor_dim=8)
    seen = {}

    def loss_fn(enc, pred, joint, targets, enc_lengths, target_lengths):
        seen.update(enc=enc.shape, pred=pred.shape, lengths=enc_lengths.tolist(), targets=targets.shape)
        return joint(enc, pred).sum()

    model(
        torch.randn(2, 40, 80),
        torch.tensor([40, 21]),
        torch.tensor([[1, 2, 0, 0], [3, 0, 0, 0]]),
        torch.tensor([2, 1]),
        loss_fn,
    )
    # the loss sees the targets at their padded width (the collate pads to the longest; trimming is a host sync)
    assert seen == {"enc": (2, 9, 16), "pred": (2, 5, 8), "lengths": [9, 4], "targets": (2, 4)}


def test_encoder_blocks_match_torchaudio_without_padding():
    torch.manual_seed(0)
    enc = ConformerEncoder(d_model=32, num_layers=2, num_heads=2, ffn_dim=64, conv_kernel_size=5).eval()
    feats, lengths = torch.randn(2, 40, 80), torch.tensor([40, 40])
    ours, _ = enc(feats, lengths)
    frames, frame_lengths = enc.subsampling(feats, lengths)
    reference, _ = enc.conformer(frames, frame_lengths)
    torch.testing.assert_close(ours, reference)


def test_unpadded_subsampling_masking_leaves_valid_frames_as_before():
    # The original front-end (padding 0) never let padding reach valid frames; masking must not change them.
    torch.manual_seed(0)
    sub = Conv2dSubsampling(80, 32, factor=4)
    feats, lengths = torch.randn(2, 41, 80), torch.tensor([41, 23])
    out, out_lengths = sub(feats, lengths)
    plain = sub.conv(feats.unsqueeze(1))  # (B, C, T', F') without any masking
    plain = sub.out(plain.transpose(1, 2).flatten(2))
    for b, n in enumerate(out_lengths.tolist()):
        torch.testing.assert_close(out[b, :n], plain[b, :n])


def test_blank_as_pad_keeps_the_start_embedding_zero():
    """NeMo's blank_as_pad: the start symbol's input is a zero vector that training never changes."""
    model = tiny_transducer(predictor_blank_as_pad=True, predictor_dropout=0.0)
    assert torch.equal(model.predictor.embedding.weight[0], torch.zeros(model.predictor.embedding.embedding_dim))
    optimizer = torch.optim.AdamW(model.predictor.parameters(), lr=0.1, weight_decay=0.1)
    targets = torch.tensor([[1, 2, 0], [3, 0, 0]])
    model.predictor(targets).pow(2).sum().backward()
    optimizer.step()
    assert torch.equal(model.predictor.embedding.weight[0], torch.zeros(model.predictor.embedding.embedding_dim))
    zero_start, _ = model.predictor.lstm(torch.zeros(1, 1, model.predictor.embedding.embedding_dim))
    torch.testing.assert_close(model.predictor(targets[:1, :0]), zero_start)  # U = 0: the start alone
    default = tiny_transducer()
    assert default.predictor.embedding.padding_idx is None
