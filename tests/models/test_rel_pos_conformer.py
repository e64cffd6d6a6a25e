"""The NeMo-style Conformer pieces: relative-position attention, padded/depthwise subsampling, rel_pos encoder."""

from __future__ import annotations

import math

import pytest
import torch

from asr_plugin.models import ConformerEncoder, Conv2dSubsampling
from asr_plugin.models.attention import RelPositionMultiHeadAttention, relative_sinusoids


def _reference_attention(attn: RelPositionMultiHeadAttention, x: torch.Tensor, valid: int) -> torch.Tensor:
    """Transformer-XL attention of one utterance (1, T, D) written out score by score, keys < `valid` only."""
    heads, d_k = attn.num_heads, attn.head_dim
    length, d_model = x.shape[1], x.shape[2]
    q = attn.linear_q(x)[0].view(length, heads, d_k)
    k = attn.linear_k(x)[0].view(length, heads, d_k)
    v = attn.linear_v(x)[0].view(length, heads, d_k)
    out = torch.zeros(length, heads, d_k)
    for h in range(heads):
        for i in range(length):
            scores = []
            for j in range(valid):
                distance = float(i - j)
                sinusoid = torch.zeros(d_model)
                for c in range(0, d_model, 2):
                    sinusoid[c] = math.sin(distance / 10000 ** (c / d_model))
                    sinusoid[c + 1] = math.cos(distance / 10000 ** (c / d_model))
                r = attn.linear_pos(sinusoid).view(heads, d_k)[h]
                scores.append(
                    ((q[i, h] + attn.pos_bias_u[h]) @ k[j, h] + (q[i, h] + attn.pos_bias_v[h]) @ r) / math.sqrt(d_k)
                )
            weights = torch.softmax(torch.stack(scores), 0)
            out[i, h] = weights @ v[:valid, h]
    return attn.linear_out(out.reshape(length, d_model)).unsqueeze(0)


def test_rel_pos_attention_matches_written_out_transformer_xl_scores():
    torch.manual_seed(0)
    attn = RelPositionMultiHeadAttention(d_model=8, num_heads=2).eval()
    with torch.no_grad():
        attn.pos_bias_u.normal_()
        attn.pos_bias_v.normal_()
        x = torch.randn(2, 6, 8)
        padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
        ours = attn(x, relative_sinusoids(6, 8), padding)
        for b, valid in enumerate([6, 4]):
            reference = _reference_attention(attn, x[b : b + 1], valid)
            torch.testing.assert_close(ours[b, :valid], reference[0, :valid], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("padding", "depthwise", "factor"), [(1, False, 4), (1, True, 8), (0, False, 4), (1, False, 2)]
)
def test_subsampling_lengths_match_tensor(padding, depthwise, factor):
    def expected(length: int) -> int:
        for _ in range(factor.bit_length() - 1):
            length = (length + 2 * padding - 3) // 2 + 1  # conv output size, kernel 3, stride 2
        return length

    sub = Conv2dSubsampling(80, 16, factor=factor, channels=8, padding=padding, depthwise=depthwise)
    assert sub.min_input_length() == next(n for n in range(1, 100) if expected(n) >= 1)
    for length in range(sub.min_input_length(), 50):
        out, out_len = sub(torch.randn(1, length, 80), torch.tensor([length]))
        assert out.shape == (1, int(out_len), 16) and int(out_len) == expected(length), length


def test_depthwise_subsampling_has_fastconformer_layers():
    sub = Conv2dSubsampling(80, 32, factor=8, channels=16, padding=1, depthwise=True)
    shapes = [tuple(layer.weight.shape) for layer in sub.conv if isinstance(layer, torch.nn.Conv2d)]
    assert shapes == [(16, 1, 3, 3), (16, 1, 3, 3), (16, 16, 1, 1), (16, 1, 3, 3), (16, 16, 1, 1)]
    assert sub.out.in_features == 16 * 10  # 80 bins -> 40 -> 20 -> 10


@pytest.mark.parametrize("subsampling", ["striding", "dw_striding", "conv2d"])
def test_rel_pos_encoder_output_does_not_depend_on_batch_padding(subsampling):
    torch.manual_seed(0)
    enc = ConformerEncoder(
        d_model=16,
        num_layers=2,
        num_heads=2,
        ffn_dim=32,
        conv_kernel_size=5,
        dropout=0.0,
        attention="rel_pos",
        subsampling=subsampling,
        subsampling_channels=8,
        xscaling=True,
    )
    enc.eval()
    feats = torch.randn(2, 70, 80)
    out, lengths = enc(feats, torch.tensor([70, 37]))
    alone, alone_lengths = enc(feats[1:, :37], torch.tensor([37]))
    assert int(lengths[1]) == int(alone_lengths[0]) == alone.shape[1]
    torch.testing.assert_close(out[1, : int(lengths[1])], alone[0], atol=1e-5, rtol=1e-5)


def test_xscaling_multiplies_the_subsampled_frames():
    torch.manual_seed(0)
    scaled = ConformerEncoder(
        d_model=16, num_layers=0, num_heads=2, ffn_dim=32, attention="rel_pos", subsampling="striding", xscaling=True
    ).eval()
    plain = ConformerEncoder(
        d_model=16, num_layers=0, num_heads=2, ffn_dim=32, attention="rel_pos", subsampling="striding", xscaling=False
    ).eval()
    plain.load_state_dict(scaled.state_dict())
    feats, lengths = torch.randn(1, 20, 80), torch.tensor([20])
    torch.testing.assert_close(scaled(feats, lengths)[0], plain(feats, lengths)[0] * 4.0)


def test_encoder_options_are_validated():
    with pytest.raises(ValueError, match="attention='abs_pos'"):
        ConformerEncoder(d_model=16, num_heads=2, attention="abs_pos")
    with pytest.raises(ValueError, match="subsampling='vggnet'"):
        ConformerEncoder(d_model=16, num_heads=2, subsampling="vggnet")
    with pytest.raises(ValueError, match="bias=False needs attention='rel_pos'"):
        ConformerEncoder(d_model=16, num_heads=2, bias=False)
    with pytest.raises(ValueError, match="conv_kernel_size=4 must be odd"):
        ConformerEncoder(d_model=16, num_heads=2, conv_kernel_size=4, attention="rel_pos")


def test_bias_free_blocks_have_no_linear_or_conv_biases():
    enc = ConformerEncoder(d_model=16, num_layers=1, num_heads=2, ffn_dim=32, attention="rel_pos", bias=False)
    names = [name for name, _ in enc.layers.named_parameters() if name.endswith(".bias")]
    assert all("norm" in name for name in names), names  # only LayerNorm / BatchNorm shifts remain


def test_rel_pos_encoder_trains_under_bf16_autocast():
    torch.manual_seed(0)
    enc = ConformerEncoder(
        d_model=16,
        num_layers=1,
        num_heads=2,
        ffn_dim=32,
        attention="rel_pos",
        subsampling="dw_striding",
        subsampling_channels=8,
        subsampling_factor=8,
    ).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, lengths = enc(torch.randn(2, 60, 80), torch.tensor([60, 33]))
    assert out.dtype == torch.bfloat16 and lengths.tolist() == [8, 5]
    out.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in enc.layers.parameters())
