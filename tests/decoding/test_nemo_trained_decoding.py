"""Our decoding against NeMo 3.0.0's own on models NeMo itself trained: the committed references
(tests/nemo_references, `benchmarks.nemo_reference`), a full-context RNN-T and TDT and a cache-aware streaming
RNN-T FastConformer.

On all dev and test utterances of the full-context references (80 of the RNN-T's, 200 of the TDT's), the same
``.nemo`` read by both (our import with our front end and encoder; NeMo's restore with its preprocessor and
encoder): greedy transcripts equal NeMo's ``greedy_batch`` on >= 99.5 %, beam 4's WER is no worse than NeMo's
``malsd_batch`` at beam 4 (both without length normalisation, and both with NeMo's default ``score_norm``, where
the transcripts agree too), and word start and end equal NeMo's (``compute_timestamps``) within one encoder frame
for >= 99 % of the words. On the streaming reference, cache-aware streaming (no endpoints) times every word as the
offline search under the same context does, within one encoder frame. (Confidence against NeMo's, on the same
references: tests/decoding/test_nemo_decoding.py.)"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from built_once import committed_nemo_reference

pytest.importorskip("nemo.collections.asr")
pytestmark = pytest.mark.nemo

from omegaconf import OmegaConf  # noqa: E402

from asr_plugin.audio import load_audio  # noqa: E402
from asr_plugin.decoding import beam_search, greedy_search, hypothesis_timing  # noqa: E402
from asr_plugin.evaluation.decoding_settings import decoding_settings  # noqa: E402
from asr_plugin.formats import read_model  # noqa: E402
from asr_plugin.frontend.spec import build_frontend  # noqa: E402
from benchmarks.nemo_decoding import nemo_encode, nemo_hypotheses, set_strategy  # noqa: E402
from benchmarks.nemo_reference import EVAL_SPLITS, read_nemo_manifest, word_error_rate  # noqa: E402
from benchmarks.nemo_streaming import our_streaming_hypotheses  # noqa: E402

BATCH = 16
UTTERANCES = {"full_context": 80, "tdt": 200}  # dev and test of each reference


@dataclass
class Decoded:
    """Ours and NeMo's hypotheses of a full-context reference's dev and test utterances, in manifest order."""

    name: str
    texts: list[str]  # the manifests' transcripts
    tokenizer: object
    greedy: list
    beam: list
    nemo_greedy: list  # greedy_batch with compute_timestamps
    nemo_beam: list  # malsd_batch, beam 4, score_norm off (as `beam`)
    beam_norm: list  # beam 4 with score_norm (our default)
    nemo_beam_norm: list  # malsd_batch, beam 4, score_norm on (NeMo's default)


@pytest.fixture(scope="module", params=["full_context", "tdt"])
def decoded(request, tmp_path_factory) -> Decoded:
    from nemo.collections.asr.models import ASRModel

    ref = committed_nemo_reference(tmp_path_factory, request.param)
    entries = [entry for split in EVAL_SPLITS for entry in read_nemo_manifest(ref.manifests[split])]
    waves = [load_audio(entry["audio_filepath"]) for entry in entries]
    loaded = read_model(ref.models["rnnt"])
    model, tokenizer = loaded.model.eval(), loaded.require_tokenizer()
    cap = decoding_settings(loaded, {})["max_symbols_per_frame"]
    frontend = build_frontend(loaded.require_frontend_spec()).eval()
    nemo = ASRModel.restore_from(str(ref.models["rnnt"]), map_location="cpu").eval()
    saved = OmegaConf.to_container(nemo.cfg.decoding, resolve=True)
    greedy, beam, beam_norm, ours, theirs = [], [], [], [], []
    with torch.no_grad():
        for start in range(0, len(waves), BATCH):
            chunk = waves[start : start + BATCH]
            audio = torch.nn.utils.rnn.pad_sequence(chunk, batch_first=True)
            lengths = torch.tensor([len(wave) for wave in chunk])
            ours.append(model.encode(*frontend(audio, lengths)))
            theirs.append(nemo_encode(nemo, audio, lengths))
        for encoded, encoded_lengths in ours:
            greedy += greedy_search(model, encoded, encoded_lengths, cap, tokenizer)
            beam += beam_search(model, encoded, encoded_lengths, 4, tokenizer, cap, score_norm=False)
            beam_norm += beam_search(model, encoded, encoded_lengths, 4, tokenizer, cap, score_norm=True)
        set_strategy(nemo, saved, "greedy_batch", cap, compute_timestamps=True)
        nemo_greedy = [hyp for batch in theirs for hyp in nemo_hypotheses(nemo, *batch)]
        set_strategy(nemo, saved, "malsd_batch", cap, 4, **{"beam.score_norm": False})
        nemo_beam = [hyp for batch in theirs for hyp in nemo_hypotheses(nemo, *batch)]
        set_strategy(nemo, saved, "malsd_batch", cap, 4, **{"beam.score_norm": True})
        nemo_beam_norm = [hyp for batch in theirs for hyp in nemo_hypotheses(nemo, *batch)]
    texts = [entry["text"] for entry in entries]
    return Decoded(request.param, texts, tokenizer, greedy, beam, nemo_greedy, nemo_beam, beam_norm, nemo_beam_norm)


def same_tokens(mine, theirs) -> bool:
    return [token - 1 for token in mine.tokens] == [int(token) for token in theirs.y_sequence]  # NeMo's blank last


def test_greedy_transcripts_equal_nemo_greedy_batch(decoded: Decoded) -> None:
    count = len(decoded.texts)
    same = sum(same_tokens(m, h) for m, h in zip(decoded.greedy, decoded.nemo_greedy, strict=True))
    assert count == UTTERANCES[decoded.name] and sum(len(h.tokens) for h in decoded.greedy) > 5 * count
    print(f"{decoded.name}: {same} of {count} greedy transcripts equal NeMo's greedy_batch")
    assert same >= 0.995 * count, f"{same} of {count} greedy transcripts equal NeMo's"
    assert [m.text for m in decoded.greedy] == [h.text for h in decoded.nemo_greedy]


def test_beam_four_wer_is_no_worse_than_nemo_malsd_batch(decoded: Decoded) -> None:
    ours = word_error_rate([h.text for h in decoded.beam], decoded.texts)
    theirs = word_error_rate([h.text for h in decoded.nemo_beam], decoded.texts)
    greedy = word_error_rate([h.text for h in decoded.greedy], decoded.texts)
    print(f"{decoded.name} WER: greedy {greedy:.4f}, beam 4 ours {ours:.4f}, NeMo malsd_batch {theirs:.4f}")
    assert ours <= theirs + 1e-9, (ours, theirs)
    assert ours < greedy, (ours, greedy)


def test_beam_four_with_score_norm_equals_nemo_malsd_batch_with_its_default(decoded: Decoded) -> None:
    """NeMo's default ``score_norm=True`` on both sides (the result chosen by log-probability / (tokens + 1)): the
    same transcripts on nearly every utterance, a WER no worse, and below the unnormalised beam's here."""
    ours = word_error_rate([h.text for h in decoded.beam_norm], decoded.texts)
    theirs = word_error_rate([h.text for h in decoded.nemo_beam_norm], decoded.texts)
    plain = word_error_rate([h.text for h in decoded.beam], decoded.texts)
    same = sum(same_tokens(m, h) for m, h in zip(decoded.beam_norm, decoded.nemo_beam_norm, strict=True))
    print(
        f"{decoded.name} WER with score_norm: beam 4 ours {ours:.4f}, NeMo {theirs:.4f} ({same} of {len(decoded.texts)} the same)"
    )
    assert ours <= theirs + 1e-9, (ours, theirs)
    assert same >= 0.95 * len(decoded.texts), f"{same} of {len(decoded.texts)} transcripts equal NeMo's"
    assert ours < plain, (ours, plain)


def test_word_timestamps_equal_nemo_within_one_encoder_frame(decoded: Decoded) -> None:
    near = total = 0
    for mine, theirs in zip(decoded.greedy, decoded.nemo_greedy, strict=True):
        if not same_tokens(mine, theirs):
            continue  # other words (at most 0.5 %: the greedy test)
        words = hypothesis_timing(mine, decoded.tokenizer, frame_shift=1.0).words  # in encoder frames
        assert [w.text for w in words] == [w["word"] for w in theirs.timestamp["word"]]
        for word, their_word in zip(words, theirs.timestamp["word"]):
            near += abs(word.start - their_word["start_offset"]) <= 1 and abs(word.end - their_word["end_offset"]) <= 1
            total += 1
    print(f"{decoded.name}: {near} of {total} words within one encoder frame of NeMo's")
    assert total > 2 * len(decoded.texts)
    assert near >= 0.99 * total, f"{near} of {total} words within one encoder frame of NeMo's"


@pytest.fixture(scope="module")
def streaming_reference(tmp_path_factory):
    return committed_nemo_reference(tmp_path_factory, "streaming")


def test_streamed_word_timestamps_equal_offline_on_the_streaming_reference(streaming_reference) -> None:
    """Cache-aware streaming of the 80 utterances as one batch of streams, at lookahead (16, 1): every word's start
    and end (encoder frames from the stream's start) within one frame of the offline search's."""
    ref = streaming_reference
    paths = [entry["audio_filepath"] for split in EVAL_SPLITS for entry in read_nemo_manifest(ref.manifests[split])]
    loaded = read_model(ref.models["rnnt"])
    tokenizer = loaded.require_tokenizer()
    segments, offline = our_streaming_hypotheses(loaded, paths, ref.settings["att_context_size"][1])
    near = total = same = 0
    for stream, hyp in zip(segments, offline, strict=True):
        words = [w for s in stream for w in hypothesis_timing(s.hypothesis, tokenizer, frame_shift=1.0).words]
        want = hypothesis_timing(hyp, tokenizer, frame_shift=1.0).words  # in encoder frames
        if [w.text for w in words] != [w.text for w in want]:
            continue
        same += 1
        for got, ref_word in zip(words, want):
            near += abs(got.start - ref_word.start) <= 1 and abs(got.end - ref_word.end) <= 1
            total += 1
    print(f"{same} of {len(paths)} streamed transcripts equal offline; {near} of {total} words within a frame")
    assert len(paths) == 80 and same >= 0.99 * len(paths) and total > 2 * len(paths), (same, total)
    assert near == total, f"{near} of {total} streamed words within one encoder frame of the offline ones"
