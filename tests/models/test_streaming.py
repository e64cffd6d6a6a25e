"""Cache-aware streaming: stepping chunk by chunk with caches equals the whole-utterance forward under the
context's mask, for every lookahead, both styles, ragged and staggered batches; bad input is refused by name."""

from __future__ import annotations

import pytest
import torch
from tiny_models import STREAMING_FEATURES as FEATURES
from tiny_models import streaming_encoder

from asr_plugin.models import ConformerEncoder, Conv2dSubsampling, build_transducer
from asr_plugin.models.context import blocked_attention, context_sizes, visible
from asr_plugin.models.streaming import encode_in_chunks

CUDA = pytest.param(
    "cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
)


def assert_streaming_is_exact(encoder, context, lengths, device="cpu"):
    encoder = encoder.to(device)
    features = torch.randn(len(lengths), max(lengths), FEATURES, device=device)
    lengths = torch.tensor(lengths, device=device)
    with torch.no_grad():
        whole, whole_lengths = encoder(features, lengths, context)
        streamed, streamed_lengths = encode_in_chunks(encoder, features, lengths, encoder.streaming_setup(context))
    assert streamed_lengths.tolist() == whole_lengths.tolist()
    for row, length in enumerate(whole_lengths.tolist()):
        torch.testing.assert_close(streamed[row, :length], whole[row, :length], atol=1e-5, rtol=0)


@pytest.mark.parametrize("context", [(4, 0), (4, 1), (4, 3)])
@pytest.mark.parametrize("lengths", [[150], [150, 97, 33, 1]])
def test_chunked_limited_steps_equal_the_masked_forward_for_every_lookahead(context, lengths):
    assert_streaming_is_exact(streaming_encoder(), context, lengths)


@pytest.mark.parametrize(
    ("context", "options"),
    [
        ((3, 0), {}),
        ((3, 1), {}),
        ((-1, 2), {}),
        ((3, 1), {"conv_context_size": None, "conv_norm_type": "batch_norm"}),  # a centred convolution too
    ],
)
def test_regular_style_steps_equal_the_masked_forward(context, options):
    encoder = streaming_encoder("regular", [context], **options)
    assert_streaming_is_exact(encoder, context, [120, 61, 9])


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_streams_on_the_device_of_the_model(device):
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # fp32 convolutions: comparable to 1e-5
        assert_streaming_is_exact(streaming_encoder(), (4, 1), [150, 97, 33], device)


def test_batch_norm_and_striding_subsampling_stream_exactly():
    encoder = streaming_encoder(conv_norm_type="batch_norm", subsampling="striding", subsampling_factor=4)
    assert_streaming_is_exact(encoder, (4, 1), [90, 41])


def test_streams_that_start_late_and_wait_in_between_are_exact():
    encoder = streaming_encoder(contexts=[(6, 2)])
    setup = encoder.streaming_setup()
    features, total = torch.randn(2, 100, FEATURES), 100
    whole, whole_lengths = encoder(features, torch.tensor([total, total]))
    state = encoder.initial_state(2, setup)
    consumed, pieces = [0, 0], [[], []]
    for time in range(30):
        sizes = []
        for row in range(2):
            paused = (row == 1 and time < 3) or (row == 0 and time in (4, 5))
            chunk = setup.first_chunk_frames if consumed[row] == 0 else setup.chunk_frames
            sizes.append(0 if paused else min(chunk, total - consumed[row]))
        chunk = torch.zeros(2, max(max(sizes), 1), FEATURES)
        for row in range(2):
            chunk[row, : sizes[row]] = features[row, consumed[row] : consumed[row] + sizes[row]]
        final = torch.tensor([sizes[row] > 0 and consumed[row] + sizes[row] == total for row in range(2)])
        with torch.no_grad():
            frames, counts, state = encoder.step(chunk, torch.tensor(sizes), state, setup, final)
        for row in range(2):
            pieces[row].append(frames[row, : counts[row]])
            consumed[row] += sizes[row]
    for row in range(2):
        streamed = torch.cat(pieces[row])
        assert len(streamed) == int(whole_lengths[row])
        torch.testing.assert_close(streamed, whole[row], atol=1e-5, rtol=0)


def test_a_reset_row_starts_a_new_stream():
    encoder = streaming_encoder(contexts=[(4, 1)])
    setup = encoder.streaming_setup()
    features = torch.randn(1, setup.first_chunk_frames, FEATURES)
    lengths = torch.tensor([setup.first_chunk_frames])
    with torch.no_grad():
        fresh, _, state = encoder.step(features, lengths, encoder.initial_state(1, setup), setup)
        _, _, state = encoder.step(torch.randn(1, setup.chunk_frames, FEATURES), torch.tensor([16]), state, setup)
        again, _, _ = encoder.step(features, lengths, state.reset(torch.tensor([True])), setup)
    torch.testing.assert_close(again, fresh, atol=0, rtol=0)


def test_setup_sizes_are_nemos():
    # NeMo's CacheAwareStreamingConfig for [70, 13] with 8x causal subsampling: chunk_size [105, 112],
    # pre_encode_cache_size [0, 9], drop_extra_pre_encoded 2, valid_out_len 14, last_channel_cache_size 70
    encoder = streaming_encoder(contexts=[(70, 13), (70, 0)])
    setup = encoder.streaming_setup()
    assert (setup.first_chunk_frames, setup.chunk_frames, setup.pre_encode_cache_size) == (105, 112, 9)
    assert (setup.valid_out_len, setup.cache_drop_size, setup.drop_extra_pre_encoded) == (14, 0, 2)
    assert (setup.last_channel_cache_size, setup.conv_cache_size) == (70, 4)
    assert encoder.streaming_setup([70, 0]).first_chunk_frames == 1
    state = encoder.initial_state(3, setup)
    assert state.cache_last_channel.shape == (2, 3, 70, 16) and state.cache_last_time.shape == (2, 3, 16, 4)
    assert state.pre_encode_cache.shape == (3, 9, FEATURES) and state.cache_last_channel_len.tolist() == [0, 0, 0]


def test_a_limited_context_changes_the_whole_utterance_forward():
    encoder = streaming_encoder(contexts=[(4, 0), (-1, -1)])
    features, lengths = torch.randn(1, 120, FEATURES), torch.tensor([120])
    limited, _ = encoder(features, lengths)  # the default: the first context
    full, _ = encoder(features, lengths, [-1, -1])
    assert not torch.allclose(limited, full, atol=1e-3)
    # frame 0 of the last layer sees frames 0..0 under [4, 0]: changing a later frame leaves it unchanged
    later = features.clone()
    later[:, 40:] += 1.0
    torch.testing.assert_close(encoder(later, lengths)[0][:, :5], limited[:, :5], atol=1e-6, rtol=0)


def reference_visible(query: int, key: int, context: tuple[int, int], style: str) -> bool:
    """NeMo's _create_masks written out for one (query, key) pair."""
    left, right = context
    if style == "chunked_limited" and right >= 0:
        back = query // (right + 1) - key // (right + 1)
        return 0 <= back and (left < 0 or back <= left // (right + 1))
    return (left < 0 or key >= query - left) and (right < 0 or key <= query + right)


@pytest.mark.parametrize("style", ["regular", "chunked_limited"])
@pytest.mark.parametrize("context", [(4, 0), (4, 1), (6, 2), (-1, 3), (2, -1), (-1, -1)])
def test_masks_are_nemos_rules(style, context):
    positions = torch.arange(-8, 13)
    mask = visible(positions, positions, context, style)
    for i, query in enumerate(positions.tolist()):
        for j, key in enumerate(positions.tolist()):
            assert bool(mask[i, j]) == reference_visible(query, key, context, style), (query, key)


def test_padded_queries_keep_a_key_and_padded_keys_are_blocked():
    valid = torch.tensor([[True] * 5 + [False] * 3])
    blocked = blocked_attention((2, 1), "chunked_limited", valid, valid)
    assert not blocked[0, 6].all()  # a padded query row attends somewhere (no NaN)
    assert blocked[0, :5, 5:].all()


def test_bad_contexts_are_refused_by_name():
    with pytest.raises(ValueError, match=r"att_context_size\[1\]=\[6, 3\].*multiple of the chunk"):
        context_sizes([[4, 1], [6, 3]], "chunked_limited")
    assert context_sizes([6, 3], "regular") == [(6, 3)]
    with pytest.raises(ValueError, match="att_context_style='causal'"):
        context_sizes(None, "causal")
    with pytest.raises(ValueError, match=r"att_context_size\[0\]=\[4\]"):
        context_sizes([[4]], "regular")
    with pytest.raises(ValueError, match="att_context_probs has 1 entries for 2"):
        streaming_encoder(contexts=[(4, 0), (4, 1)], att_context_probs=[1.0])
    with pytest.raises(ValueError, match="sum to 1"):
        streaming_encoder(contexts=[(4, 0), (4, 1)], att_context_probs=[0.5, 0.6])


def test_streaming_options_on_torchaudio_blocks_are_refused_by_name():
    with pytest.raises(
        ValueError, match="att_context_size, conv_norm_type: streaming options need attention='rel_pos'"
    ):
        ConformerEncoder(d_model=16, num_heads=2, att_context_size=[4, 0], conv_norm_type="layer_norm")
    with pytest.raises(ValueError, match="causal_downsampling needs subsampling='striding' or 'dw_striding'"):
        ConformerEncoder(d_model=16, num_heads=2, attention="rel_pos", causal_downsampling=True)


def test_models_that_cannot_stream_with_caches_say_so():
    full = build_transducer(8, d_model=16, num_heads=2, attention="rel_pos", subsampling="dw_striding")
    with pytest.raises(ValueError, match=r"unlimited right context.*buffered streaming.*asr_plugin.decoding"):
        full.encoder.streaming_setup()
    encoder = streaming_encoder(causal_downsampling=False)
    with pytest.raises(ValueError, match=r"causal_downsampling=True.*buffered streaming"):
        encoder.streaming_setup()
    with pytest.raises(ValueError, match=r"att_context_size=\[4, 2\] is not one of this model's contexts"):
        streaming_encoder().streaming_setup([4, 2])
    with pytest.raises(ValueError, match=r"att_context_size=\[4, 2\] is not one of this model's contexts"):
        streaming_encoder()(torch.randn(1, 30, FEATURES), torch.tensor([30]), [4, 2])
    with pytest.raises(ValueError, match="conv_context_size looks 2 frames ahead"):
        streaming_encoder(conv_context_size=None).streaming_setup()
    with pytest.raises(ValueError, match="attention='mha' encoders have no cache-aware streaming"):
        ConformerEncoder(d_model=16, num_heads=2).streaming_setup()


def test_bad_steps_are_refused_by_name():
    encoder = streaming_encoder()
    setup = encoder.streaming_setup([4, 1])  # first chunk 9 feature frames, later 16
    state = encoder.initial_state(2, setup)
    features = torch.randn(2, 9, FEATURES)
    with pytest.raises(ValueError, match=r"lengths\[1\]=5 is shorter than the 9 feature frames the subsampling"):
        encoder.step(features, torch.tensor([9, 5]), state, setup)
    encoder.step(features, torch.tensor([9, 5]), state, setup, torch.tensor([False, True]))  # a stream's end
    with pytest.raises(ValueError, match="at most 16"):
        encoder.step(torch.randn(2, 17, FEATURES), torch.tensor([9, 9]), state, setup)
    with pytest.raises(ValueError, match=r"lengths\[0\]=12: stream 0 takes 9 feature frames .*its first"):
        encoder.step(torch.randn(2, 16, FEATURES), torch.tensor([12, 9]), state, setup)
    with pytest.raises(ValueError, match=r"features must be \(B, T, 20\)"):
        encoder.step(torch.randn(2, 9, 21), torch.tensor([9, 9]), state, setup)
    with pytest.raises(ValueError, match=r"features hold 2 streams, lengths \(2,\) and the state 3"):
        encoder.step(features, torch.tensor([9, 9]), encoder.initial_state(3, setup), setup)
    with pytest.raises(ValueError, match="eval mode"):
        encoder.train().step(features, torch.tensor([9, 9]), state, setup)


@pytest.mark.parametrize("conv_context_size", ["causal", [4, 0], [2, 2], None])
def test_conv_context_pads_as_declared(conv_context_size):
    encoder = streaming_encoder(conv_context_size=conv_context_size, conv_norm_type="batch_norm")
    conv = encoder.layers[0].conv
    x, padding = torch.randn(1, 12, 16), torch.zeros(1, 12, dtype=torch.bool)
    left, right = conv.context
    # the depthwise convolution on explicitly zero-padded frames, written out
    glu = torch.nn.functional.glu(conv.pointwise_conv1(x.transpose(1, 2)), dim=1)
    depthwise = torch.nn.functional.conv1d(
        torch.nn.functional.pad(glu, (left, right)), conv.depthwise_conv.weight, conv.depthwise_conv.bias, groups=16
    )
    expected = conv.pointwise_conv2(conv.activation(conv.batch_norm(depthwise))).transpose(1, 2)
    torch.testing.assert_close(conv(x, padding), expected)


def test_a_limited_context_trains_under_bf16_autocast():
    encoder = streaming_encoder(conv_norm_type="batch_norm").train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, lengths = encoder(torch.randn(2, 90, FEATURES), torch.tensor([90, 41]), [4, 1])
    assert out.dtype == torch.bfloat16 and lengths.tolist() == [13, 6]  # L -> L // 2 + 1, three times
    out.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in encoder.layers.parameters())


@pytest.mark.parametrize("depthwise", [False, True])
def test_causal_subsampling_lengths_and_causality(depthwise):
    sub = Conv2dSubsampling(FEATURES, 16, factor=8, channels=8, padding=1, depthwise=depthwise, causal=True).eval()
    assert sub.min_input_length() == 1 and sub.out.in_features == 8 * 4  # 20 bins -> 11 -> 6 -> 4
    for length in range(1, 40):
        out, out_lengths = sub(torch.randn(1, length, FEATURES), torch.tensor([length]))
        assert out.shape[1] == int(out_lengths[0]) == ((length // 2 + 1) // 2 + 1) // 2 + 1, length
    features = torch.randn(1, 80, FEATURES)
    changed = features.clone()
    changed[:, 41:] += 1.0  # frame t sees features up to 8 t: frames 0..5 keep their values
    before, _ = sub(features, torch.tensor([80]))
    after, _ = sub(changed, torch.tensor([80]))
    torch.testing.assert_close(after[:, :6], before[:, :6], atol=0, rtol=0)
    assert not torch.allclose(after[:, 6], before[:, 6])
