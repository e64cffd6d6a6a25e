"""Decoding an `export_onnx_streaming` directory with sherpa-onnx's stock online recogniser, and the same streams in
this project.

- `online_recognizer` builds ``sherpa_onnx.OnlineRecognizer.from_transducer(...)`` as a user would, and
  `online_transcribe` feeds it audio in pieces as an application does (decoding every window that is ready,
  then silence and ``input_finished``, as sherpa-onnx's own examples do: sherpa decodes only whole windows);
- `streaming_on_sherpa_windows` is the reference the export is exact to: this project's `StreamingRecognizer`
  on the feature frames sherpa-onnx's windows cover (from the first on, up to the last window's last step);
- `recipe_streaming` is the recipe's own streaming of the audio (its online features as the pieces arrive,
  every frame decoded at the end), what eval.py's streaming transcripts are.

All search greedily with sherpa-onnx's cap of 10 tokens per frame (``max_symbols_per_frame = 10`` in its
``online-transducer-greedy-search-nemo-decoder.cc``, as in the offline one: `SHERPA_MAX_SYMBOLS`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from asr_plugin.decoding import CacheAwareEncoder, Hypothesis, StreamingRecognizer, attach_text
from asr_plugin.decoding.hypothesis import TokenDecoder
from asr_plugin.export.onnx_export import SHERPA_MAX_SYMBOLS
from asr_plugin.export.sherpa_decode import onnx_metadata
from asr_plugin.export.streaming_modules import FeatureCarry
from asr_plugin.frontend.online.fbank import StreamingFbank
from asr_plugin.frontend.sherpa import SHERPA_HOP_LENGTH, SHERPA_SAMPLE_RATE, SherpaOnlineFbank
from asr_plugin.models import Transducer

PIECE_SAMPLES = SHERPA_SAMPLE_RATE // 10  # 100 ms pieces, as audio arrives from a microphone
ONLINE_MAX_SYMBOLS = SHERPA_MAX_SYMBOLS["rnnt"]


def sherpa_windows(num_frames: int, window_size: int, chunk_shift: int) -> int:
    """How many windows sherpa-onnx runs on `num_frames` feature frames: window k once more than
    ``k * chunk_shift + window_size`` frames are ready (``IsReady``), and none past the end."""
    return 0 if num_frames <= window_size else (num_frames - window_size - 1) // chunk_shift + 1


def tail_padding_samples(window_size: int, chunk_shift: int) -> int:
    """Samples of silence after which every frame of the audio lies in a window sherpa-onnx runs: the ready test
    leaves up to ``window_size + chunk_shift`` frames undecoded."""
    return (window_size + chunk_shift) * SHERPA_HOP_LENGTH


def online_recognizer(export_dir: str | os.PathLike, int8: bool = False, num_threads: int = 1):
    """sherpa-onnx's online recogniser of a streaming export directory (greedy search; the ``*.int8.onnx`` files
    with `int8`); it computes its own features (sherpa_online) and reads the window from the encoder."""
    import sherpa_onnx

    export_dir = Path(export_dir)
    suffix = ".int8.onnx" if int8 else ".onnx"
    return sherpa_onnx.OnlineRecognizer.from_transducer(
        tokens=str(export_dir / "tokens.txt"),
        encoder=str(export_dir / f"encoder{suffix}"),
        decoder=str(export_dir / f"decoder{suffix}"),
        joiner=str(export_dir / f"joiner{suffix}"),
        num_threads=num_threads,
        sample_rate=SHERPA_SAMPLE_RATE,
        feature_dim=int(onnx_metadata(export_dir / f"encoder{suffix}")["feat_dim"]),
        model_type="nemo_transducer",
        decoding_method="greedy_search",
    )


def online_transcribe(
    recognizer,
    waveform: np.ndarray,
    padding_samples: int,
    piece_samples: int = PIECE_SAMPLES,
) -> str:
    """sherpa-onnx's transcript of a 16 kHz float waveform in [-1, 1] fed `piece_samples` at a time, each window
    decoded as soon as it is ready, then `padding_samples` of silence and the end of input."""
    stream = recognizer.create_stream()
    waveform = np.asarray(waveform, dtype=np.float32)
    pieces = [waveform[start : start + piece_samples] for start in range(0, len(waveform), piece_samples)]
    for piece in [*pieces, np.zeros(padding_samples, dtype=np.float32)]:
        stream.accept_waveform(SHERPA_SAMPLE_RATE, np.ascontiguousarray(piece))
        while recognizer.is_ready(stream):
            recognizer.decode_stream(stream)
    stream.input_finished()
    while recognizer.is_ready(stream):
        recognizer.decode_stream(stream)
    return recognizer.get_result(stream)


@torch.no_grad()
def streaming_on_sherpa_windows(
    model: Transducer,
    att_context_size: list[int] | tuple[int, int] | None,
    features: torch.Tensor,
    tokenizer: TokenDecoder | None = None,
) -> Hypothesis:
    """What sherpa-onnx decodes of (T, F) online feature frames through the streaming export of
    `att_context_size`: `StreamingRecognizer` fed them from the first up to the last chunk of the last window
    sherpa-onnx runs (`sherpa_windows`; window k is step k of the step API), every chunk whole, not finished."""
    encoder = CacheAwareEncoder(model, att_context_size)
    setup = encoder.setup
    carry = FeatureCarry(setup, features.shape[1], len(model.encoder.layers), model.encoder.output_dim)
    windows = sherpa_windows(features.shape[0], carry.window_size, carry.chunk_shift)
    end = setup.first_chunk_frames + (windows - 1) * setup.chunk_frames if windows else 0
    session = StreamingRecognizer(
        model, encoder, feature_dim=features.shape[1], max_symbols_per_frame=ONLINE_MAX_SYMBOLS, tokenizer=tokenizer
    )
    state = session.accept(features[None, :end], torch.tensor([end]), session.initial_state(1))
    return session.partial(state)[0]


@torch.no_grad()
def recipe_streaming(
    model: Transducer,
    att_context_size: list[int] | tuple[int, int] | None,
    frontend: SherpaOnlineFbank,
    waveform: np.ndarray,
    tokenizer: TokenDecoder | None = None,
    piece_samples: int = PIECE_SAMPLES,
) -> Hypothesis:
    """The recipe's streaming transcript of a waveform fed `piece_samples` at a time: `StreamingRecognizer` with
    the online front end (`StreamingFbank`) and the cache-aware encoder, finished (every frame decoded)."""
    session = StreamingRecognizer(
        model,
        CacheAwareEncoder(model, att_context_size),
        features=StreamingFbank(frontend.eval()),
        max_symbols_per_frame=ONLINE_MAX_SYMBOLS,
        tokenizer=tokenizer,
    )
    audio = torch.as_tensor(np.asarray(waveform, dtype=np.float32))
    state = session.initial_state(1)
    for start in range(0, len(audio), piece_samples):
        piece = audio[None, start : start + piece_samples]
        state = session.accept(piece, torch.tensor([piece.shape[1]]), state)
    state = session.finish(state)
    segments = session.segments(state)[0]
    return segments[0].hypothesis if segments else attach_text([Hypothesis()], tokenizer)[0]  # no token: no segment
