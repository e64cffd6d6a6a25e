"""Audio files -> text with a trained model, through the tokenizer and the features it was trained on (both read
from the model file itself: a checkpoint's records, a ``.nemo``'s tokenizer and preprocessor; no run directory or
data config needed)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import soundfile as sf
import torch
import torchaudio
from tqdm import tqdm

from asr_plugin.data.frontend import build_frontend
from asr_plugin.decoding import decode
from asr_plugin.evaluation.chunking import chunk_bounds
from asr_plugin.evaluation.decoding_settings import decoding_settings
from asr_plugin.formats import read_model


def read_audio(path: str | os.PathLike, sample_rate: int) -> torch.Tensor:
    """Any soundfile-readable file -> (N,) float32 mono at `sample_rate` (channels averaged, resampled)."""
    try:
        samples, rate = sf.read(str(path), dtype="float32", always_2d=True)  # (N, C)
    except (RuntimeError, OSError) as err:
        raise ValueError(f"{path}: unreadable audio ({err})") from None
    if samples.shape[0] == 0:
        raise ValueError(f"{path}: empty audio")
    waveform = torch.from_numpy(samples.mean(axis=1))
    return torchaudio.functional.resample(waveform, rate, sample_rate) if rate != sample_rate else waveform


class Transcriber:
    """A model file -> text, with the file's tokenizer and front end.

    Args:
        checkpoints: the model file(s) `asr_plugin.formats.read_model` reads: one (a checkpoint, a ``.nemo``),
            or several checkpoints to average (of one run: same tokenizer and front end).
        method, beam, max_symbols_per_frame: see `asr_plugin.decoding.decode`; ``max_symbols_per_frame=None``
            (the default) is the file's own (its validation's), another value is logged as an override.
        chunk_seconds: audio longer than this is decoded in chunks of at most this many seconds, cut at the
            quietest moment near each chunk's end (`asr_plugin.evaluation.chunking`), with a progress bar on
            stderr; the default is about LibriSpeech's longest training utterance.
        chunks_per_batch: chunks encoded together.
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
    ) -> None:
        if chunk_seconds <= 0 or chunks_per_batch < 1:
            raise ValueError(
                f"chunk_seconds={chunk_seconds} must be positive and chunks_per_batch={chunks_per_batch} >= 1"
            )
        loaded = read_model(list(checkpoints), device=device)
        self.model, self.tokenizer = loaded.model, loaded.require_tokenizer()
        if self.tokenizer.vocab_size != self.model.vocab_size:
            raise ValueError(
                f"{loaded.path}: its tokenizer has {self.tokenizer.vocab_size} ids, its model {self.model.vocab_size}"
            )
        self.frontend = build_frontend(loaded.require_frontend_spec()).eval().to(device)  # eval: no dither
        decoding = decoding_settings(loaded, {"max_symbols_per_frame": max_symbols_per_frame})
        self.options = {"method": method, "beam": beam, **decoding}
        self.chunk_seconds, self.chunks_per_batch = chunk_seconds, chunks_per_batch
        self.device = device

    @torch.no_grad()
    def decode_pieces(self, pieces: Sequence[torch.Tensor]) -> list[str]:
        """Texts of (N_i,) waveforms at the front end's sample rate, decoded as one padded batch."""
        lengths = torch.tensor([piece.shape[0] for piece in pieces], device=self.device)
        audio = torch.nn.utils.rnn.pad_sequence(list(pieces), batch_first=True).to(self.device)  # (B, S)
        features, frames = self.frontend(audio, lengths)  # (B, T, F), (B,)
        encoder_out, encoder_lengths = self.model.encode(features, frames)
        hyps = decode(self.model, encoder_out, encoder_lengths, tokenizer=self.tokenizer, **self.options)
        return [hyp.text or "" for hyp in hyps]

    def transcribe_file(self, path: str | os.PathLike) -> str:
        """The text of one file; a long one in chunks, their texts joined by spaces."""
        rate = self.frontend.sample_rate
        waveform = read_audio(path, rate)
        bounds = chunk_bounds(waveform, rate, self.chunk_seconds)
        texts: list[str] = []
        with tqdm(
            total=len(bounds),
            desc=f"{Path(path).name} ({waveform.shape[0] / rate:.0f} s)",
            unit="chunk",
            disable=len(bounds) == 1,
            file=sys.stderr,
        ) as progress:
            for first in range(0, len(bounds), self.chunks_per_batch):
                group = bounds[first : first + self.chunks_per_batch]
                texts += self.decode_pieces([waveform[start:end] for start, end in group])
                progress.update(len(group))
        return " ".join(text for text in texts if text)

    def transcribe(self, paths: Sequence[str | os.PathLike]) -> list[str]:
        """One text per file, in order."""
        return [self.transcribe_file(path) for path in paths]
