"""Audio files -> text with a trained model, through the tokenizer and the features it was trained on (both read
from the model file itself: a checkpoint's records, a ``.nemo``'s tokenizer and preprocessor; no run directory or
data config needed). A file is read piece by piece (`asr_plugin.audio.stream`) and cut into chunks as it is
read (`asr_plugin.evaluation.chunking`): memory stays that of a few chunks, whatever the file's length."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from asr_plugin.audio.stream import audio_blocks, audio_seconds
from asr_plugin.decoding import Hypothesis, decode, encoder_frame_shift, subsampling_factor
from asr_plugin.decoding.hypothesis import Timing
from asr_plugin.decoding.timestamps import hypothesis_timing, joined_timing
from asr_plugin.evaluation.chunking import stream_chunks
from asr_plugin.evaluation.decoding_settings import decoding_settings, model_tokenizer
from asr_plugin.evaluation.fusion_spec import NO_FUSION, FusionSpec
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend
from asr_plugin.progress import Progress


def _groups(chunks: Iterator[torch.Tensor], size: int) -> Iterator[list[torch.Tensor]]:
    group: list[torch.Tensor] = []
    for chunk in chunks:
        group.append(chunk)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


class Transcriber:
    """A model file -> text, with the file's tokenizer and front end.

    Args:
        checkpoints: the model file(s) `asr_plugin.formats.read_model` reads: one (a checkpoint, a ``.nemo``),
            or several checkpoints to average (of one run: same tokenizer and front end).
        method, beam, max_symbols_per_frame, score_norm: see `asr_plugin.decoding.decode`;
            ``max_symbols_per_frame=None`` (the default) is the file's own (its validation's), another value is
            logged as an override.
        chunk_seconds: audio longer than this is decoded in chunks of at most this many seconds, cut at the
            quietest moment near each chunk's end (`asr_plugin.evaluation.chunking`), with its progress on
            stderr (`asr_plugin.progress`); the default is about LibriSpeech's longest training utterance.
        chunks_per_batch: chunks encoded together.
        segment_pause: `transcribe_timed`'s segments also end at a pause between words longer than this many
            seconds (None: only at ``.?!``; `asr_plugin.decoding.timestamps`).
        fusion: what to fuse into the search (`FusionSpec`: phrase boosting), spelt with the file's tokenizer.
    """

    def __init__(
        self,
        checkpoints: Sequence[str | os.PathLike],
        method: str = "beam",
        beam: int = 4,
        max_symbols_per_frame: int | None = None,
        device: str = "cpu",
        chunk_seconds: float = 30.0,
        chunks_per_batch: int = 4,
        segment_pause: float | None = None,
        fusion: FusionSpec = NO_FUSION,
        score_norm: bool = True,
    ) -> None:
        if chunk_seconds <= 0 or chunks_per_batch < 1:
            raise ValueError(
                f"chunk_seconds={chunk_seconds} must be positive and chunks_per_batch={chunks_per_batch} >= 1"
            )
        loaded = read_model(list(checkpoints), device=device)
        self.model, self.tokenizer = loaded.model, model_tokenizer(loaded)
        self.frontend = build_frontend(loaded.require_frontend_spec()).eval().to(device)  # eval: no dither
        decoding = decoding_settings(loaded, {"max_symbols_per_frame": max_symbols_per_frame})
        scorers = fusion.scorers(self.tokenizer)
        self.options = {"method": method, "beam": beam, **decoding, "fusion": scorers, "score_norm": score_norm}
        self.chunk_seconds, self.chunks_per_batch = chunk_seconds, chunks_per_batch
        self.device = device
        self.segment_pause = segment_pause
        rate, hop = self.frontend.sample_rate, self.frontend.hop_length
        self.frame_shift = encoder_frame_shift(subsampling_factor(self.model), hop, rate)  # seconds per frame

    def decode_pieces(self, pieces: Sequence[torch.Tensor]) -> list[str]:
        """Texts of (N_i,) waveforms at the front end's sample rate, decoded as one padded batch."""
        return [hyp.text or "" for hyp in self.decode_hypotheses(pieces)]

    @torch.no_grad()
    def decode_hypotheses(self, pieces: Sequence[torch.Tensor]) -> list[Hypothesis]:
        """Hypotheses (text set) of (N_i,) waveforms at the front end's sample rate, as one padded batch."""
        lengths = torch.tensor([piece.shape[0] for piece in pieces], device=self.device)
        audio = torch.nn.utils.rnn.pad_sequence(list(pieces), batch_first=True).to(self.device)  # (B, S)
        features, frames = self.frontend(audio, lengths)  # (B, T, F), (B,)
        encoder_out, encoder_lengths = self.model.encode(features, frames)
        return decode(self.model, encoder_out, encoder_lengths, tokenizer=self.tokenizer, **self.options)

    def file_hypotheses(self, path: str | os.PathLike) -> Iterator[tuple[Hypothesis, float]]:
        """Each chunk's hypothesis of one file and the second the chunk starts at, in order (module docstring)."""
        rate = self.frontend.sample_rate
        seconds = audio_seconds(path)
        chunks = stream_chunks(audio_blocks(path, rate), rate, self.chunk_seconds)
        done = 0.0  # seconds decoded
        desc = f"{Path(path).name} ({seconds:.0f} s)"
        with Progress(round(seconds), desc, unit="s", enabled=seconds > self.chunk_seconds) as progress:
            for group in _groups(chunks, self.chunks_per_batch):
                before = done
                for chunk, hyp in zip(group, self.decode_hypotheses(group)):
                    yield hyp, done
                    done += chunk.shape[0] / rate
                progress.update(round(done) - round(before))

    def transcribe_file(self, path: str | os.PathLike) -> str:
        """The text of one file; a long one in chunks, their texts joined by spaces. ValueError naming the file
        when it is no audio file, empty, or holds NaN or infinite samples (refused, not transcribed as silence)."""
        return " ".join(hyp.text for hyp, _ in self.file_hypotheses(path) if hyp.text)

    def transcribe_timed(self, path: str | os.PathLike) -> tuple[str, Timing]:
        """`transcribe_file`'s text and its token, word and segment times in seconds from the file's start (a
        long file's chunks each timed from where it starts; segments may run across a cut)."""
        texts, timings = [], []
        for hyp, start in self.file_hypotheses(path):
            texts.append(hyp.text)
            timings.append(hypothesis_timing(hyp, self.tokenizer, self.frame_shift, start, self.segment_pause))
        return " ".join(text for text in texts if text), joined_timing(timings, self.segment_pause)

    def transcribe(self, paths: Sequence[str | os.PathLike]) -> list[str]:
        """One text per file, in order."""
        return [self.transcribe_file(path) for path in paths]
