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
from nemo_streaming import stream_both, whole  # noqa: E402
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
