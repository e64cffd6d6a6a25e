"""The streaming recognition session: audio pieces -> online features -> encoder stream -> streaming greedy ->
partial and final text, batched, with endpointing. Without endpoints the final text is the offline transcript of
the same features; with them every segment is the offline search of its own frames."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import CharTokenizer, tiny_transducer

from asr_plugin.decoding import (
    BufferedEncoder,
    CacheAwareEncoder,
    EndpointConfig,
    Endpointing,
    EndpointRule,
    StreamingRecognizer,
    greedy_search,
)
from asr_plugin.frontend.online.fbank import StreamingFbank
from asr_plugin.frontend.sherpa import SherpaOnlineFbank
from asr_plugin.models import ConformerEncoder

BINS = 16  # tiny_transducer's input_dim
PIECE = 1600  # 100 ms


def audio_batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) noise bursts and pauses in [-1, 1], (B,) lengths."""
    rng = np.random.default_rng(seed)
    audio = np.zeros((len(lengths), max(lengths)), dtype=np.float32)
    for b, n in enumerate(lengths):
        envelope = np.repeat(rng.uniform(0, 1, n // 800 + 1) > 0.4, 800)[:n]
        audio[b, :n] = rng.normal(0, 0.2, n) * envelope
    return torch.from_numpy(audio).clamp(-1, 1), torch.tensor(lengths)


def audio_session(model, encoder, **options) -> StreamingRecognizer:
    """A session from audio: sherpa-onnx's online features, then `encoder`."""
    return StreamingRecognizer(model, encoder, features=StreamingFbank(SherpaOnlineFbank(BINS).eval()), **options)


def stream_audio(session, audio: torch.Tensor, lengths: torch.Tensor, piece: int = PIECE):
    """Feeds every stream `piece` samples at a time, then finishes; the partial texts seen on the way too."""
    state, partials = session.initial_state(len(lengths)), []
    for start in range(0, int(lengths.max()), piece):
        counts = (lengths - start).clamp(0, piece)
        state = session.accept(audio[:, start : start + piece], counts, state)
        partials.append([h.text for h in session.partial(state)])
    return session.finish(state), partials


def offline_encoding(model, audio, lengths):
    frontend = SherpaOnlineFbank(BINS).eval()
    features, frames = frontend(audio, lengths)
    return model.encode(features, frames)


def test_a_session_without_endpoints_gives_the_offline_transcript() -> None:
    """Buffered streaming with whole-utterance windows: the final text of each stream is the offline greedy
    transcript of its whole-utterance online features; every partial text grows into it."""
    model = tiny_transducer(num_layers=1, attention="rel_pos", subsampling="striding", seed=3)
    tokenizer = CharTokenizer()
    audio, lengths = audio_batch([16000, 7000, 12345])
    session = audio_session(model, BufferedEncoder(model, 16, 400, 400), max_symbols_per_frame=3, tokenizer=tokenizer)
    state, partials = stream_audio(session, audio, lengths)
    offline = greedy_search(model, *offline_encoding(model, audio, lengths), 3, tokenizer)
    segments = session.segments(state)
    for b, want in enumerate(offline):
        assert [s.hypothesis.text for s in segments[b]] == [want.text]
        assert segments[b][0].hypothesis.timestamps == want.timestamps and segments[b][0].rule == 0
        assert all(want.text.startswith(p[b]) for p in partials)
    assert [h.tokens for h in session.partial(state)] == [[], [], []]  # finished streams have no partial
    assert sum(len(h.tokens) for h in offline) > 20


def test_endpoints_cut_segments_that_each_decode_like_a_fresh_utterance() -> None:
    """Short endpoint rules on a model that emits blanks often: segments close at the rules' frames, and each is
    the offline search of its own frames with a fresh predictor (timestamps counted from the stream's start)."""
    model = tiny_transducer(num_layers=1, attention="rel_pos", subsampling="striding", seed=5)
    with torch.no_grad():
        model.joint.output.bias[0] += 4.5  # runs of blanks between the tokens
    rules = EndpointConfig(EndpointRule(False, 0.4, 0.0), EndpointRule(True, 0.16, 0.0), EndpointRule(False, 0.0, 0.4))
    endpointing = Endpointing(0.04, rules)
    audio, lengths = audio_batch([40000, 24000], seed=2)
    session = audio_session(
        model, BufferedEncoder(model, 8, 1200, 1200), max_symbols_per_frame=2, endpointing=endpointing
    )
    state, _ = stream_audio(session, audio, lengths, piece=2000)
    encoded, encoded_lengths = offline_encoding(model, audio, lengths)
    fired, count = set(), 0
    for b, segments in enumerate(session.segments(state)):
        count += len(segments)
        previous_end = 0
        for segment in segments:
            assert previous_end <= segment.start_frame < segment.end_frame
            previous_end = segment.end_frame
            frames = encoded[b : b + 1, segment.start_frame : segment.end_frame]
            want = greedy_search(model, frames, torch.tensor([frames.shape[1]]), 2)[0]
            assert segment.hypothesis.tokens == want.tokens
            assert segment.hypothesis.timestamps == [t + segment.start_frame for t in want.timestamps]
            fired.add(segment.rule)
        assert segments[-1].end_frame <= int(encoded_lengths[b])
    assert count > 3 and {2, 3} <= fired  # rule 1 (silence without a token) leaves empty segments, not kept


streaming_available = pytest.mark.skipif(
    not hasattr(ConformerEncoder, "streaming_setup"), reason="the cache-aware encoder's step API is not here yet"
)


@streaming_available
@pytest.mark.parametrize("style", ["chunked_limited", "regular"])
def test_a_cache_aware_session_gives_the_transcript_of_the_masked_forward(style: str) -> None:
    """A streaming model stepped chunk by chunk from audio pieces: the final text is the offline greedy search of
    the whole-utterance encoder under the same context (the step API's frames are those frames)."""
    model = tiny_transducer(
        num_layers=2,
        conv_kernel_size=5,
        dropout=0.0,
        attention="rel_pos",
        subsampling="dw_striding",
        subsampling_channels=8,
        att_context_size=[[6, 2]],
        att_context_style=style,
        conv_context_size="causal",
        conv_norm_type="layer_norm",
        causal_downsampling=True,
    )
    audio, lengths = audio_batch([16000, 9000, 3000], seed=4)
    session = audio_session(model, CacheAwareEncoder(model), max_symbols_per_frame=3)
    state, _ = stream_audio(session, audio, lengths, piece=1000)
    offline = greedy_search(model, *offline_encoding(model, audio, lengths), 3)
    for segments, want in zip(session.segments(state), offline):
        assert [s.hypothesis.tokens for s in segments] == ([want.tokens] if want.tokens else [])
        assert not segments or segments[0].hypothesis.timestamps == want.timestamps
    assert sum(len(h.tokens) for h in offline) > 10


def test_refusals() -> None:
    model = tiny_transducer(num_layers=1)
    encoder = BufferedEncoder(model, 8, 8, 8)
    with pytest.raises(ValueError, match="feature_dim is needed"):
        StreamingRecognizer(model, encoder)
    with pytest.raises(ValueError, match="feature_dim=20, the feature stream gives 16 bins"):
        StreamingRecognizer(model, encoder, StreamingFbank(SherpaOnlineFbank(BINS)), feature_dim=20)
    if not hasattr(ConformerEncoder, "streaming_setup"):
        with pytest.raises(ValueError, match="has no cache-aware streaming step: use buffered streaming"):
            CacheAwareEncoder(model)
    session = StreamingRecognizer(model, encoder, StreamingFbank(SherpaOnlineFbank(BINS).eval()))
    state = session.finish(session.initial_state(2), torch.tensor([True, False]))
    with pytest.raises(ValueError, match="stream 0 has ended: it takes no more audio"):
        session.accept(torch.zeros(2, 100), torch.tensor([100, 100]), state)
    with pytest.raises(ValueError, match=r"streams must be a \(B,\)=\(2,\) bool tensor"):
        session.finish(state, torch.tensor([1, 0]))
