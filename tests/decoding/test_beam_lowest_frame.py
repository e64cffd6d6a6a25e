"""Beam search with ``schedule="lowest_frame", merge=False`` (sherpa-onnx's NeMo transducer search) against a plain
per-hypothesis float64 reference of that search, with and without phrase boosting in sherpa-onnx's scores; and
those scores, hand-worked."""

from __future__ import annotations

import pytest
import torch
from test_phrase_boosting import scorer_totals
from tiny_models import random_encoder_out, tiny_transducer

from asr_plugin.decoding import WeightedScorer, beam_search
from asr_plugin.decoding.interface import decoder_joint
from asr_plugin.decoding.phrase_boosting import PhraseBoosting, PhraseGraph


def reference_search(model, frames: torch.Tensor, beam: int, cap: int, boosting=None) -> tuple[list[int], float]:
    """The search written per hypothesis: (tokens, score, frame, tokens at the frame, predictor output and state,
    boosting state); each round extends only the hypotheses at the lowest frame (every token of the beam best
    ones, the blank moving on a frame, a hypothesis with `cap` tokens at its frame moving on unscored), keeps the
    `beam` best of the extended and the waiting ones, never merges; the best with the boosting's final score."""
    joint = decoder_joint(model)
    proj, state = joint.start(1, frames.device)
    projected = joint.project_frames(frames[None])[0]  # (T, H_j)
    hyps = [((), 0.0, 0, 0, proj, state, torch.zeros(1, dtype=torch.long))]
    while min(h[2] for h in hyps) < len(frames):
        lowest = min(h[2] for h in hyps)
        candidates = []
        for tokens, score, t, count, proj, state, boost in hyps:
            if t > lowest:
                candidates.append((tokens, score, t, count, proj, state, boost))
                continue
            if count == cap:
                candidates.append((tokens, score, t + 1, 0, proj, state, boost))
                continue
            logp = joint.joint(projected[t : t + 1], proj).double().log_softmax(-1)[0]  # (V,)
            bonus, after = boosting.advance(boost) if boosting is not None else (torch.zeros(1, len(logp)), None)
            fused = logp + bonus[0].double()
            fused[0] = logp[0]
            for k in fused.topk(beam).indices.tolist():
                if k == 0:
                    candidates.append((tokens, score + float(fused[0]), t + 1, 0, proj, state, boost))
                else:
                    new_proj, new_state = joint.predict(torch.tensor([k]), state)
                    moved = boost if after is None else after[:, k]
                    candidates.append(
                        (tokens + (k,), score + float(fused[k]), t, count + 1, new_proj, new_state, moved)
                    )
        hyps = sorted(candidates, key=lambda h: -h[1])[:beam]
    final = [h[1] + (0.0 if boosting is None else float(boosting.final(h[6])[0])) for h in hyps]
    best = max(range(len(hyps)), key=final.__getitem__)
    return list(hyps[best][0]), final[best]


@pytest.mark.parametrize("boosted", [False, True])
def test_the_lowest_frame_schedule_without_merging_is_the_reference_search(boosted: bool) -> None:
    model = tiny_transducer(seed=1)
    encoder_out, lengths = random_encoder_out(model, batch=3, frames=7, seed=1)
    boosting = PhraseBoosting(PhraseGraph.build([((3, 5), 1.5), ((2,), 1.5)], model.vocab_size, 1.5))
    fusion = [WeightedScorer(boosting, 1.0)] if boosted else []
    cap = 2
    hyps = beam_search(model, encoder_out, lengths, 3, None, cap, fusion=fusion, schedule="lowest_frame", merge=False)
    labelled = beam_search(model, encoder_out, lengths, 3, None, cap, fusion=fusion)
    for b, hyp in enumerate(hyps):
        tokens, score = reference_search(model, encoder_out[b, : lengths[b]], 3, cap, boosting if boosted else None)
        assert hyp.tokens == tokens
        assert hyp.score == pytest.approx(score, abs=1e-5)
    if not boosted:  # a different search from the default on these frames
        assert [h.score for h in hyps] != [h.score for h in labelled]


def test_sherpa_onnx_scores_keep_the_direct_bonus_and_return_to_the_root_after_a_phrase() -> None:
    sherpa = PhraseBoosting(PhraseGraph.build([((1, 2, 3), 2.0)], 5, sherpa_onnx_score=2.0))
    # each direct token earns 2 (kept) + 2 (its context score); a failing token gives back the context part only
    assert scorer_totals(sherpa, [[1, 2, 3, 4], [1, 2, 4], [1, 2]]) == [
        [0, 4, 8, 12, 12, 12],
        [0, 4, 8, 4, 4],
        [0, 4, 8, 4],
    ]
    # a phrase that is the prefix of another completes and returns to the root: the longer one never completes
    nested = [((1,), 1.0), ((1, 2), 1.0)]
    assert scorer_totals(PhraseBoosting(PhraseGraph.build(nested, 4, sherpa_onnx_score=1.0)), [[1, 2]]) == [
        [0, 2, 2, 2]
    ]
    assert scorer_totals(PhraseBoosting(PhraseGraph.build(nested, 4)), [[1, 2]]) == [[0, 2, 3, 3]]


def test_an_unknown_schedule_or_a_merge_that_is_not_a_bool_is_refused() -> None:
    model = tiny_transducer(seed=1)
    encoder_out, lengths = random_encoder_out(model, batch=1, frames=3, seed=1)
    with pytest.raises(ValueError, match="schedule 'frame'"):
        beam_search(model, encoder_out, lengths, schedule="frame")
    with pytest.raises(TypeError, match="merge"):
        beam_search(model, encoder_out, lengths, merge="no")
