"""Audio -> text as a stream: audio fed to a model's streaming session in pieces (100 ms by default, as
sherpa-onnx's users feed it), with partial results as they change and the final text at the end of the audio.

A file is read from disk block by block (`asr_plugin.audio.stream`) and cut into pieces as it is read, so
memory stays that of a block and the session's state, whatever the file's length. With endpointing, the final text
is the segments' texts joined by spaces; a partial text is the text so far: the closed segments' and the current
one's (greedy search never revises a token, so every partial text is a prefix of the final one).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from asr_plugin.audio.stream import audio_blocks, audio_seconds
from asr_plugin.decoding import RecognizerState, StreamingRecognizer, encoder_frame_shift, subsampling_factor
from asr_plugin.decoding.hypothesis import Timing
from asr_plugin.decoding.timestamps import hypothesis_timing, joined_timing
from asr_plugin.evaluation.decoding_settings import decoding_settings
from asr_plugin.evaluation.fusion_spec import NO_FUSION, FusionSpec
from asr_plugin.evaluation.streaming_session import StreamingMode, StreamingSession, build_session
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend
from asr_plugin.progress import Progress

PIECE_MS = 100.0  # sherpa-onnx's examples feed 0.1 s at a time
PROGRESS_SECONDS = 30.0  # a file longer than this shows its progress (without partial results)


def piece_samples(piece_ms: float, sample_rate: int) -> int:
    """Samples per piece of `piece_ms` milliseconds; ValueError naming the option (NaN and infinity included) for
    a piece of no sample."""
    if not (math.isfinite(piece_ms) and piece_ms > 0) or round(piece_ms * sample_rate / 1000) < 1:
        raise ValueError(
            f"piece_ms (--chunk-ms) {piece_ms!r}: audio is fed in pieces of a finite number of ms, at least one "
            f"sample ({sample_rate} Hz)"
        )
    return round(piece_ms * sample_rate / 1000)


def audio_pieces(blocks: Iterable[np.ndarray], size: int) -> Iterator[torch.Tensor]:
    """(size,) float32 pieces of audio that arrives as (M_j,) `blocks`, in order (the last one shorter), holding at
    most a piece and a block."""
    pending = torch.zeros(0)
    for block in blocks:
        pending = torch.cat((pending, torch.from_numpy(np.ascontiguousarray(block, dtype=np.float32))))
        while pending.shape[0] >= size:
            yield pending[:size].clone()  # a copy: `pending` is let go of
            pending = pending[size:]
    if pending.shape[0]:
        yield pending


def texts_so_far(recognizer: StreamingRecognizer, state: RecognizerState) -> list[str]:
    """Each stream's text so far: its final segments' texts and its current segment's, joined by spaces (after
    `finish`, the final text)."""
    texts = []
    for segments, partial in zip(recognizer.segments(state), recognizer.partial(state)):
        parts = [segment.hypothesis.text or "" for segment in segments] + [partial.text or ""]
        texts.append(" ".join(part for part in parts if part))
    return texts


@torch.no_grad()
def stream_waveforms(
    session: StreamingSession, waveforms: Sequence[torch.Tensor], piece: int, device: torch.device | str = "cpu"
) -> list[str]:
    """The final texts of (N_i,) waveforms at the session's rate, streamed together (B streams) in pieces of
    `piece` samples, then finished."""
    recognizer = session.recognizer
    lengths = torch.tensor([waveform.shape[0] for waveform in waveforms], device=device)
    audio = torch.nn.utils.rnn.pad_sequence(list(waveforms), batch_first=True).to(device)  # (B, S)
    state = recognizer.initial_state(len(waveforms), device)
    for start in range(0, int(lengths.max()) if len(waveforms) else 0, piece):
        state = recognizer.accept(audio[:, start : start + piece], (lengths - start).clamp(0, piece), state)
    return texts_so_far(recognizer, recognizer.finish(state))


class StreamingTranscriber:
    """A model file -> text as a stream, with the file's tokenizer and its front end's online features.

    Args:
        checkpoints: the model file(s) `asr_plugin.formats.read_model` reads (a checkpoint, a ``.nemo``, several
            checkpoints of one run to average).
        mode: how to stream (`StreamingMode`: cache-aware at one of the model's contexts, or buffered).
        max_symbols_per_frame: the greedy search's cap (None: the file's own, as its validation decoded).
        piece_ms: the audio fed to the session at a time.
        segment_pause: `transcribe_timed`'s segments also end at a pause between words longer than this many
            seconds (None: only at ``.?!``; `asr_plugin.decoding.timestamps`).
        fusion: what to fuse into the search (`FusionSpec`: phrase boosting), every stream with its own states.
    """

    def __init__(
        self,
        checkpoints: Sequence[str | os.PathLike],
        mode: StreamingMode,
        max_symbols_per_frame: int | None = None,
        device: str = "cpu",
        piece_ms: float = PIECE_MS,
        segment_pause: float | None = None,
        fusion: FusionSpec = NO_FUSION,
    ) -> None:
        loaded = read_model(list(checkpoints), device=device)
        max_symbols = decoding_settings(loaded, {"max_symbols_per_frame": max_symbols_per_frame})
        self.session = build_session(loaded, mode, max_symbols["max_symbols_per_frame"], device, fusion)
        self.piece = piece_samples(piece_ms, self.session.sample_rate)
        self.device = device
        self.segment_pause = segment_pause
        hop = build_frontend(loaded.require_frontend_spec()).hop_length
        self.frame_shift = encoder_frame_shift(subsampling_factor(loaded.model), hop, self.session.sample_rate)

    def transcribe_file(self, path: str | os.PathLike, on_partial: Callable[[str], None] | None = None) -> str:
        """The final text of one file, streamed from disk; `on_partial(text)` is called each time the text so far
        changes. ValueError naming the file when it is no audio file, empty, or holds NaN or infinite samples."""
        return texts_so_far(self.session.recognizer, self.stream_file(path, on_partial))[0]

    def transcribe_timed(
        self, path: str | os.PathLike, on_partial: Callable[[str], None] | None = None
    ) -> tuple[str, Timing]:
        """`transcribe_file`'s text and its token, word and segment times in seconds from the file's start (the
        streamed frames count from the stream's start, so they are the offline search's times)."""
        recognizer = self.session.recognizer
        state = self.stream_file(path, on_partial)
        hyps = [segment.hypothesis for segment in recognizer.segments(state)[0]]
        timings = [hypothesis_timing(hyp, recognizer.tokenizer, self.frame_shift) for hyp in hyps]
        return texts_so_far(recognizer, state)[0], joined_timing(timings, self.segment_pause)

    def stream_file(self, path: str | os.PathLike, on_partial: Callable[[str], None] | None = None) -> RecognizerState:
        """The session's state after one file streamed from disk and finished (`transcribe_file`)."""
        recognizer, rate = self.session.recognizer, self.session.sample_rate
        seconds = audio_seconds(path)
        state, shown = recognizer.initial_state(1, self.device), ""
        desc = f"{Path(path).name} ({seconds:.0f} s)"
        enabled = on_partial is None and seconds > PROGRESS_SECONDS
        with torch.no_grad(), Progress(round(seconds), desc, unit="s", enabled=enabled) as progress:
            fed = 0
            for piece in audio_pieces(audio_blocks(path, rate), self.piece):
                length = torch.tensor([piece.shape[0]], device=self.device)
                state = recognizer.accept(piece[None].to(self.device), length, state)
                if on_partial is not None and (text := texts_so_far(recognizer, state)[0]) != shown:
                    on_partial(text)
                    shown = text
                progress.update(round((fed + piece.shape[0]) / rate) - round(fed / rate))
                fed += piece.shape[0]
            return recognizer.finish(state)
