"""Batched greedy search for transducers: RNN-T, and TDT (token-and-duration) models as NeMo decodes them."""

from __future__ import annotations

import torch

from asr_plugin.decoding.confidence import ConfidenceMethod
from asr_plugin.decoding.fusion import Fusion
from asr_plugin.decoding.hypothesis import Hypothesis, TokenDecoder
from asr_plugin.decoding.interface import DecoderJoint
from asr_plugin.decoding.streaming_greedy import StreamingGreedyDecoder
from asr_plugin.decoding.validation import check_encoder_output
from asr_plugin.models import Transducer


@torch.no_grad()
def greedy_search(
    model: Transducer | DecoderJoint,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    max_symbols_per_frame: int = 10,
    tokenizer: TokenDecoder | None = None,
    confidence: ConfidenceMethod | None = None,
    fusion: Fusion = (),
) -> list[Hypothesis]:
    """Best-first decoding of a batch, emitting up to `max_symbols_per_frame` tokens per frame, by the greedy
    step of the model's lattice (`asr_plugin.decoding.greedy_steps`), label-looping as NeMo's ``greedy_batch``:
    `StreamingGreedyDecoder` run over the whole utterances as one chunk.

    RNN-T: at every frame the joint's argmax is taken; a blank moves to the next frame, a token is emitted and
    the predictor advances on it. The score is the sum of the chosen symbols' log-probabilities, i.e. the
    standard RNN-T path log-probability (tokens and the closing blank of each frame). When a frame reaches
    `max_symbols_per_frame` emitted tokens the search moves on without a blank and adds no blank term, the
    convention `beam_search` shares: its tokens, timestamps and score equal ``beam_search(..., beam=1)`` with the
    same `max_symbols_per_frame`.

    TDT, the way NeMo's TDT ``greedy_batch`` (label looping) decodes: per utterance, from frame t = 0 with the
    predictor on the start symbol, the joint's output at (t, state) gives the best token (argmax of the V token
    scores) and the best duration d (argmax of the duration scores; a blank whose best duration is 0 advances 1
    frame instead); t += d. After a blank the search keeps reading the frames it lands on, with the same predictor
    state, until a token comes or t passes the last frame. A token is emitted with timestamp the frame it was
    found at, and the predictor advances on it; a token of duration 0 keeps t, so the next token may come from
    the same frame. When `max_symbols_per_frame` consecutive tokens share a frame and t is still that frame, t
    moves on by one (no blank is scored). Score: the sum over the chosen steps of log softmax(tokens)[token] +
    log softmax(durations)[duration] (the duration taken: 1 for a blank whose best was 0).

    Shallow fusion (`fusion`), NeMo's rule (`asr_plugin.decoding.greedy_steps.fused_greedy_token`): the joint's
    argmax alone decides blank or token; for a token, the argmax over the non-blank tokens of the joint's token
    log-probabilities plus the weighted scores of the scorers (blank and durations untouched). The score sums the
    chosen values (fused for tokens) and adds the scorers' final scores at the end.

    Call ``model.eval()`` first: predictor and joint dropout would otherwise randomise the result.

    Args:
        model: the transducer, or any `DecoderJoint` (an exported model).
        encoder_out: (B, T, H_e) float encoder frames.
        encoder_lengths: (B,) int64 valid frames per utterance.
        max_symbols_per_frame: >= 1, cap on tokens emitted at one frame.
        tokenizer: when given, each hypothesis' `.text` is ``tokenizer.decode(tokens)``.
        confidence: when given, each token's confidence by this method (`Hypothesis.token_confidence`).
        fusion: shallow-fusion scorers and their weights (an n-gram LM, phrase boosting); empty: none.
    Returns:
        B hypotheses in batch order.
    """
    check_encoder_output(encoder_out, encoder_lengths)
    decoder = StreamingGreedyDecoder(model, max_symbols_per_frame, confidence, fusion)
    state = decoder.initial_state(encoder_out.shape[0], encoder_out.device)
    return decoder.hypotheses(decoder.step(encoder_out, encoder_lengths, state), tokenizer)
