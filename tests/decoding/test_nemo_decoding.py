"""Our decoding against NeMo's own on the same encoder output of the same .nemo (RNN-T and TDT FastConformers that
NeMo builds from its example configs, random weights sharpened so that they emit tokens, and the committed
NeMo-trained RNN-T and TDT references on their dev and test utterances; skipped without NeMo): greedy_batch
(label looping) transcripts, word offsets (``compute_timestamps``) and token and word confidence for each of
NeMo's measures (TDT also with its duration confidence), and malsd_batch beam search at beam 4 against ours."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch
from built_once import committed_nemo_reference

pytest.importorskip("nemo.collections.asr")
pytestmark = [pytest.mark.nemo, pytest.mark.slow]

from omegaconf import OmegaConf  # noqa: E402

from asr_plugin.audio import load_audio  # noqa: E402
from asr_plugin.decoding import (  # noqa: E402
    ConfidenceMethod,
    beam_search,
    greedy_search,
    hypothesis_timing,
    word_confidence,
)
from asr_plugin.decoding.interface import lattice_durations  # noqa: E402
from asr_plugin.formats.nemo.importer import import_nemo  # noqa: E402
from benchmarks.nemo_compare import SHARPEN, speech_like_audio  # noqa: E402
from benchmarks.nemo_decoding import nemo_encode, nemo_hypotheses, set_strategy  # noqa: E402
from benchmarks.nemo_examples import save_example_model  # noqa: E402
from benchmarks.nemo_reference import EVAL_SPLITS, read_nemo_manifest  # noqa: E402

MAX_SYMBOLS = 10
UTTERANCES = 24


class Case(NamedTuple):
    """NeMo's model and its decoding config as saved, our import, NeMo's (B, D, T) encoder output, (B,) lengths."""

    nemo: object
    decoding: dict
    ours: object
    encoded: torch.Tensor
    lengths: torch.Tensor


EXAMPLES = ["fast_conformer_transducer", "fast_conformer_tdt"]
REFERENCES = ["full_context", "tdt"]  # the committed NeMo-trained RNN-T and TDT (tests/nemo_references)


@pytest.fixture(scope="module", params=EXAMPLES + [f"reference:{name}" for name in REFERENCES])
def models(request, tmp_path_factory):
    """The `Case` of an example's 24 utterances, or of a reference's dev and test utterances (`nemo_hypotheses_of`
    starts from the decoding config as saved every time)."""
    from nemo.collections.asr.models import ASRModel

    kind, _, name = request.param.partition(":")
    if kind == "reference":
        ref = committed_nemo_reference(tmp_path_factory, name)
        path = ref.models["rnnt"]
        waves = [
            load_audio(e["audio_filepath"]) for split in EVAL_SPLITS for e in read_nemo_manifest(ref.manifests[split])
        ]
        audio = torch.nn.utils.rnn.pad_sequence(waves, batch_first=True)
        audio_lengths = torch.tensor([len(wave) for wave in waves])
    else:
        path = save_example_model(request.param, tmp_path_factory.mktemp("nemo"))
        audio, audio_lengths = speech_like_audio([8000 + 1400 * i for i in range(UTTERANCES)], seed=3)
    nemo = ASRModel.restore_from(str(path), map_location="cpu").eval()
    ours = import_nemo(path)
    decoding = OmegaConf.to_container(nemo.cfg.decoding, resolve=True)
    with torch.no_grad():
        if kind != "reference":  # random weights: sharpened so that they emit tokens
            nemo.joint.joint_net[-1].weight.mul_(SHARPEN)
            ours.model.joint.output.weight.mul_(SHARPEN)
        encoded, encoded_lengths = nemo_encode(nemo, audio, audio_lengths)
    return Case(nemo, decoding, ours, encoded, encoded_lengths)


def nemo_hypotheses_of(case: Case, strategy: str, **options):
    """NeMo's hypotheses of the batch by `strategy` (beam 4, no length normalisation unless `options` set
    ``beam.score_norm``), the decoding config also changed as `options` say."""
    set_strategy(case.nemo, case.decoding, strategy, MAX_SYMBOLS, 4, **{"beam.score_norm": False, **options})
    return nemo_hypotheses(case.nemo, case.encoded, case.lengths)


def ours_frames(encoded: torch.Tensor) -> torch.Tensor:
    return encoded.transpose(1, 2).contiguous()  # (B, T, D)


def test_greedy_equals_nemo_greedy_batch(models) -> None:
    ours, encoded, lengths = models.ours, models.encoded, models.lengths
    theirs = nemo_hypotheses_of(models, "greedy_batch")
    mine = greedy_search(ours.model, ours_frames(encoded), lengths, MAX_SYMBOLS, ours.tokenizer)
    same = sum([t - 1 for t in m.tokens] == [int(t) for t in h.y_sequence] for m, h in zip(mine, theirs))
    count = len(lengths)
    print(f"{same} of {count} greedy transcripts equal NeMo's greedy_batch")
    assert sum(len(m.tokens) for m in mine) > 3 * count
    assert same >= 0.995 * count, f"{same} of {count} transcripts equal"


def test_word_timestamps_equal_nemo_within_one_frame(models) -> None:
    ours, encoded, lengths = models.ours, models.encoded, models.lengths
    theirs = nemo_hypotheses_of(models, "greedy_batch", compute_timestamps=True)
    mine = greedy_search(ours.model, ours_frames(encoded), lengths, MAX_SYMBOLS, ours.tokenizer)
    counts = {"char": [0, 0], "word": [0, 0]}  # [within one frame, all]
    for m, h in zip(mine, theirs):
        if [t - 1 for t in m.tokens] != [int(t) for t in h.y_sequence]:
            continue  # other words (at most 0.5 %: the greedy test)
        timing = hypothesis_timing(m, ours.tokenizer, frame_shift=1.0)  # in frames
        assert [w.text for w in timing.words] == [w["word"] for w in h.timestamp["word"]]
        for kind, spans in (("char", timing.tokens), ("word", timing.words)):
            assert len(spans) == len(h.timestamp[kind])
            for span, theirs_span in zip(spans, h.timestamp[kind]):
                near = (
                    abs(span.start - theirs_span["start_offset"]) <= 1
                    and abs(span.end - theirs_span["end_offset"]) <= 1
                )
                counts[kind][0] += near
                counts[kind][1] += 1
    assert counts["char"][1] > 3 * len(lengths) and counts["word"][1] >= len(lengths)
    print(f"within one frame of NeMo's: {counts}")
    for kind, (near, total) in counts.items():
        assert near >= 0.99 * total, f"{near} of {total} {kind} offsets within one frame"


MEASURES = [ConfidenceMethod("max_prob", alpha=a) for a in (1.0, 0.5)] + [
    ConfidenceMethod("entropy", kind, alpha, norm, aggregation)
    for kind in ("gibbs", "tsallis", "renyi")
    for alpha, norm, aggregation in ((0.33, "exp", "min"), (1.0, "lin", "mean"), (0.5, "lin", "prod"))
]


def assert_confidence_equals_nemo(case: Case, method: ConfidenceMethod) -> None:
    """Token and word confidence of our greedy search within 1e-4 of NeMo's greedy_batch with the same method."""
    ours, encoded, lengths = case.ours, case.encoded, case.lengths
    confidence = {
        "preserve_token_confidence": True,
        "preserve_word_confidence": True,
        "exclude_blank": True,
        "aggregation": method.aggregation,
        "tdt_include_duration": method.tdt_include_duration,
        "method_cfg": {
            "name": method.name,
            "entropy_type": method.entropy_type,
            "alpha": method.alpha,
            "entropy_norm": method.entropy_norm,
        },
    }
    theirs = nemo_hypotheses_of(case, "greedy_batch", confidence_cfg=confidence)
    mine = greedy_search(ours.model, ours_frames(encoded), lengths, MAX_SYMBOLS, ours.tokenizer, method)
    compared = 0
    for m, h in zip(mine, theirs):
        if [t - 1 for t in m.tokens] != [int(t) for t in h.y_sequence]:
            continue  # a different transcript has other confidences (at most 0.5 %: the greedy test)
        assert m.token_confidence == pytest.approx([float(c) for c in h.token_confidence], abs=1e-4)
        assert word_confidence(m, ours.tokenizer, method) == pytest.approx(
            [float(c) for c in h.word_confidence], abs=1e-4
        )
        compared += len(m.tokens)
    assert compared > 3 * len(lengths)


@pytest.mark.parametrize("method", MEASURES, ids=repr)
def test_confidence_equals_nemo(models, method: ConfidenceMethod) -> None:
    assert_confidence_equals_nemo(models, method)


DURATION_MEASURES = [
    ConfidenceMethod("max_prob", alpha=0.5, aggregation="mean", tdt_include_duration=True),
    ConfidenceMethod("entropy", "tsallis", 0.33, "exp", "min", tdt_include_duration=True),
    ConfidenceMethod("entropy", "renyi", 1.0, "lin", "prod", tdt_include_duration=True),
]


@pytest.mark.parametrize("method", DURATION_MEASURES, ids=repr)
def test_tdt_duration_confidence_equals_nemo(models, method: ConfidenceMethod) -> None:
    """NeMo's ``tdt_include_duration``: a TDT token's confidence aggregates its token and duration measures."""
    if lattice_durations(models.ours.model.lattice) is None:
        pytest.skip("an RNN-T model has no durations")
    assert_confidence_equals_nemo(models, method)


def test_beam_four_finds_hypotheses_at_least_as_likely_as_nemo_malsd(models) -> None:
    """Both searches keep 4 hypotheses per utterance, label-synchronously, and score a hypothesis by the log of its
    surviving alignments' summed probability (both without length normalisation here): on the same model, ours
    finds one at least as likely as NeMo's, and as greedy's path, on nearly every utterance (4 hypotheses may all
    outscore greedy's prefix and end below it: 1 of the RNN-T reference's 80 utterances at beam 4, none at 8)."""
    ours, encoded, lengths = models.ours, models.encoded, models.lengths
    theirs = nemo_hypotheses_of(models, "malsd_batch")
    mine = beam_search(ours.model, ours_frames(encoded), lengths, 4, ours.tokenizer, MAX_SYMBOLS, score_norm=False)
    greedy = greedy_search(ours.model, ours_frames(encoded), lengths, MAX_SYMBOLS)
    count = len(lengths)
    above_greedy = sum(m.score >= g.score - 1e-4 for m, g in zip(mine, greedy))
    assert above_greedy >= 0.95 * count, f"ours at least as likely as greedy on {above_greedy} of {count} utterances"
    better = sum(m.score >= float(h.score) - 1e-3 for m, h in zip(mine, theirs))
    print(f"ours at least as likely as NeMo's malsd_batch on {better} of {count} utterances")
    assert better >= 0.95 * count, f"ours at least as likely on {better} of {count} utterances"


def test_beam_four_with_score_norm_chooses_as_well_as_nemo_malsd(models) -> None:
    """NeMo's default ``score_norm=True`` on both sides: each returns its hypothesis of the highest log-probability
    / (tokens + 1), with the raw log-probability as its score, and ours is at least as good by that measure on
    nearly every utterance."""
    ours, encoded, lengths = models.ours, models.encoded, models.lengths
    theirs = nemo_hypotheses_of(models, "malsd_batch", **{"beam.score_norm": True})
    mine = beam_search(ours.model, ours_frames(encoded), lengths, 4, ours.tokenizer, MAX_SYMBOLS)
    plain = beam_search(ours.model, ours_frames(encoded), lengths, 4, ours.tokenizer, MAX_SYMBOLS, score_norm=False)
    assert all(m.score <= p.score + 1e-6 for m, p in zip(mine, plain))  # the raw score, the most probable's at most
    mine_norm = [m.score / (len(m.tokens) + 1) for m in mine]
    theirs_norm = [float(h.score) / (len(h.y_sequence) + 1) for h in theirs]
    better = sum(m >= h - 1e-3 for m, h in zip(mine_norm, theirs_norm))
    count = len(lengths)
    print(f"score_norm: ours at least as good as NeMo's malsd_batch on {better} of {count} utterances")
    assert better >= 0.95 * count, f"ours at least as good on {better} of {count} utterances"
