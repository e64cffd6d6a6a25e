"""Our streaming encoder against NeMo's cache-aware ConformerEncoder with the same weights (skipped without NeMo).

A NeMo FastConformer (causal dw_striding subsampling, causal convolution, LayerNorm convolution norm, a
multi-lookahead ``att_context_size``) with random weights, and ours with its weights mapped as the NeMo
importer maps encoder keys: the masked whole-utterance forward of every lookahead agrees, and our step API
gives what NeMo's ``cache_aware_stream_step`` gives chunk by chunk (frames and the three caches), fed as NeMo's
``CacheAwareStreamingAudioBuffer`` feeds it. This pins the mask, the causal subsampling's padding and the
cache layout to NeMo's.

One place differs on purpose: NeMo's buffer pads the pre-encode cache with zero features while fewer than
``subsampling_factor + 1`` features precede a chunk (the second chunk when a stream's first chunk is a single
frame: right context 0, or regular style). Zero features are not the whole-utterance forward's zero padding of
every subsampling layer, so there NeMo's step departs from NeMo's own forward while ours masks each layer and
does not. The test checks exactly that, then hands NeMo our caches and compares the rest. And at a stream's
end in regular style NeMo's step caches ``frames - cache_drop_size`` frames of a shortened chunk (none, where
it emits one), so the frames after it lack one in their history; ours emits the stream's last frames as its
forward computes them, compared with that forward only.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("nemo.collections.asr")
pytestmark = pytest.mark.nemo

from nemo.collections.asr.modules import ConformerEncoder as NemoConformerEncoder  # noqa: E402
from tiny_models import STREAMING_FEATURES as FEATURES  # noqa: E402
from tiny_models import streaming_encoder  # noqa: E402

from asr_plugin.formats.nemo.weights import convert_state_dict  # noqa: E402
from asr_plugin.models import ConformerEncoder  # noqa: E402

CHUNKED = [[4, 0], [4, 1], [4, 3]]
REGULAR = [[3, 1], [3, 0]]
LENGTHS = [100, 61]


def encoders(style: str, contexts: list[list[int]]) -> tuple[NemoConformerEncoder, ConformerEncoder]:
    torch.manual_seed(0)
    nemo = NemoConformerEncoder(
        feat_in=FEATURES,
        n_layers=2,
        d_model=16,
        n_heads=2,
        ff_expansion_factor=2,
        subsampling="dw_striding",
        subsampling_factor=8,
        subsampling_conv_channels=8,
        causal_downsampling=True,
        self_attention_model="rel_pos",
        att_context_size=contexts,
        att_context_style=style,
        xscaling=True,
        conv_kernel_size=5,
        conv_norm_type="layer_norm",
        conv_context_size="causal",
        dropout=0.0,
        dropout_pre_encoder=0.0,
        dropout_emb=0.0,
        dropout_att=0.0,
    )
    with torch.no_grad():
        for param in nemo.parameters():  # non-trivial biases, norm scales and pos_bias_u/v
            param.add_(0.1 * torch.randn_like(param))
    ours = streaming_encoder(style, contexts)  # its weights replaced by NeMo's below
    mapped, report = convert_state_dict({f"encoder.{key}": value for key, value in nemo.state_dict().items()})
    assert not report.not_imported
    ours.load_state_dict({key.removeprefix("encoder."): value for key, value in mapped.items()})
    return nemo.eval(), ours.eval()


def whole(nemo, ours, features, lengths, context):
    nemo.set_default_att_context_size(context)
    theirs, their_lengths = nemo(audio_signal=features.transpose(1, 2), length=lengths)
    mine, my_lengths = ours(features, lengths, context)
    return theirs.transpose(1, 2), their_lengths, mine, my_lengths


def stream_both(nemo, ours, features, lengths, context) -> dict[str, float]:
    """Steps NeMo (as its streaming buffer does) and ours side by side; the largest differences seen."""
    _, _, reference, reference_lengths = whole(nemo, ours, features, lengths, context)  # also sets NeMo's context
    config, setup = nemo.streaming_cfg, ours.streaming_setup(context)
    batch, total = features.shape[0], int(lengths.max())
    cache_channel, cache_time, cache_len = nemo.get_initial_cache_state(batch_size=batch)
    state = ours.initial_state(batch, setup)
    theirs, mine = [[] for _ in range(batch)], [[] for _ in range(batch)]
    worst = {"frames": 0.0, "caches": 0.0, "departure": 0.0}
    position, step = 0, 0
    while position < total:
        first = step == 0
        size, shift = config.chunk_size[not first], config.shift_size[not first]
        pre = config.pre_encode_cache_size[not first]
        zero_padded = pre > position and not first  # NeMo's window starts before the stream
        window = features[:, max(0, position - pre) : position + size]
        window = torch.nn.functional.pad(window, (0, 0, max(0, pre - position), 0))
        window_lengths = (lengths - position + pre).clamp(0, window.shape[1])
        new = setup.first_chunk_frames if first else setup.chunk_frames
        start = position + size - new  # ours takes only the features it has not seen
        chunk = features[:, start : start + new]
        chunk_lengths = (lengths - start).clamp(0, chunk.shape[1])
        final = (chunk_lengths > 0) & (lengths <= start + new)
        frames, frame_lengths, cache_channel, cache_time, cache_len = nemo.cache_aware_stream_step(
            processed_signal=window.transpose(1, 2),
            processed_signal_length=window_lengths,
            cache_last_channel=cache_channel,
            cache_last_time=cache_time,
            cache_last_channel_len=cache_len,
            keep_all_outputs=position + size >= total,
            drop_extra_pre_encoded=0 if first else None,
        )
        my_frames, my_lengths, state = ours.step(chunk, chunk_lengths, state, setup, final)
        live = (chunk_lengths == new).tolist()
        exact = ((lengths >= position + size) | (config.cache_drop_size == 0)).tolist()  # see the docstring
        for row in range(batch):
            if exact[row]:
                theirs[row].append(frames[row].T[: frame_lengths[row]])
            mine[row].append(my_frames[row, : my_lengths[row]])
            if live[row] and zero_padded:
                done = sum(len(piece) for piece in mine[row]) - int(my_lengths[row])
                departure = (theirs[row][-1] - reference[row, done : done + len(theirs[row][-1])]).abs().max()
                worst["departure"] = max(worst["departure"], float(departure))
            elif live[row]:
                caches = [
                    (cache_channel[:, row] - state.cache_last_channel[:, row]).abs().max(),
                    (cache_time[:, row] - state.cache_last_time[:, row]).abs().max(),
                ]
                assert int(cache_len[row]) == int(state.cache_last_channel_len[row])
                worst["caches"] = max(worst["caches"], *map(float, caches))
        if zero_padded:  # NeMo continues from our caches, which are the whole-utterance forward's
            cache_channel, cache_time = state.cache_last_channel.clone(), state.cache_last_time.clone()
            for row in range(batch):
                theirs[row][-1] = mine[row][-1]  # a stream whose first chunk ran to its end is not zero padded
        position += shift
        step += 1
    for row in range(batch):
        length = int(reference_lengths[row])
        their_frames, my_frames = torch.cat(theirs[row])[:length], torch.cat(mine[row])
        assert len(my_frames) == length and len(their_frames) > length // 2
        worst["frames"] = max(worst["frames"], float((their_frames - my_frames[: len(their_frames)]).abs().max()))
        # and ours is the masked whole-utterance forward
        torch.testing.assert_close(my_frames, reference[row, :length], atol=1e-5, rtol=0)
    return worst


@pytest.mark.parametrize(("style", "contexts"), [("chunked_limited", CHUNKED), ("regular", REGULAR)])
def test_masked_whole_utterance_forward_equals_nemos_for_every_lookahead(style, contexts):
    nemo, ours = encoders(style, contexts)
    features, lengths = torch.randn(len(LENGTHS), max(LENGTHS), FEATURES), torch.tensor(LENGTHS)
    with torch.no_grad():
        for context in contexts:
            theirs, their_lengths, mine, my_lengths = whole(nemo, ours, features, lengths, context)
            assert my_lengths.tolist() == their_lengths.tolist()
            difference = max(
                float((theirs[row, :length] - mine[row, :length]).abs().max())
                for row, length in enumerate(my_lengths.tolist())
            )
            print(f"{style} {context} whole-utterance max abs diff {difference:.1e}")
            assert difference <= 1e-4, context


@pytest.mark.parametrize(
    ("style", "contexts", "context"),
    [("chunked_limited", CHUNKED, context) for context in CHUNKED]
    + [("regular", REGULAR, context) for context in REGULAR],
)
def test_steps_equal_nemos_cache_aware_stream_step(style, contexts, context):
    nemo, ours = encoders(style, contexts)
    features, lengths = torch.randn(len(LENGTHS), max(LENGTHS), FEATURES), torch.tensor(LENGTHS)
    with torch.no_grad():
        worst = stream_both(nemo, ours, features, lengths, context)
    print(f"{style} {context} step max abs diffs " + ", ".join(f"{key} {value:.1e}" for key, value in worst.items()))
    assert worst["frames"] <= 1e-4 and worst["caches"] <= 1e-4
    single_frame_first_chunk = style == "regular" or context[1] == 0
    assert (worst["departure"] > 1e-3) == single_frame_first_chunk  # NeMo's zero-padded pre-encode cache
