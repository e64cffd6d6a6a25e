"""Audio files -> text with a trained checkpoint, using the features the model was trained on."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import soundfile as sf
import torch
import torchaudio
from omegaconf import OmegaConf

from asr_plugin.data.audio import SAMPLE_RATE
from asr_plugin.data.features import FeatureStats, GlobalNormalize, LogMelFeatures
from asr_plugin.data.layout import CorpusLayout
from asr_plugin.data.tokenizer import Tokenizer
from asr_plugin.decoding import decode
from asr_plugin.evaluation.checkpoints import load_model


def find_run_config(checkpoint: str | os.PathLike) -> Path | None:
    """The training run's composed config (<run>/.hydra/config.yaml) above a checkpoint, if any."""
    for parent in Path(checkpoint).resolve().parents:
        candidate = parent / ".hydra" / "config.yaml"
        if candidate.is_file():
            return candidate
    return None


def data_files_from_run_config(config: str | os.PathLike) -> tuple[Path, Path, int]:
    """(tokenizer path, feature stats path, mel bins) of a training run's data config."""
    cfg = OmegaConf.load(config)
    try:
        data = cfg.data
        layout = None if data.tokenizer_path and data.stats_path else CorpusLayout(data.root, data.work_dir)
        tokenizer = data.tokenizer_path or layout.tokenizer(data.tokenizer_type, data.vocab_size)
        return Path(tokenizer), Path(data.stats_path or layout.stats), int(data.num_mel_bins)
    except Exception as err:  # missing keys or unresolvable interpolations
        raise ValueError(f"{config}: cannot read data.tokenizer_path / stats_path / num_mel_bins ({err})") from None


def read_audio(path: str | os.PathLike) -> torch.Tensor:
    """Any soundfile-readable file -> (N,) float32 mono at 16 kHz (channels averaged, resampled)."""
    try:
        samples, rate = sf.read(str(path), dtype="float32", always_2d=True)  # (N, C)
    except (RuntimeError, OSError) as err:
        raise ValueError(f"{path}: unreadable audio ({err})") from None
    if samples.shape[0] == 0:
        raise ValueError(f"{path}: empty audio")
    waveform = torch.from_numpy(samples.mean(axis=1))
    return torchaudio.functional.resample(waveform, rate, SAMPLE_RATE) if rate != SAMPLE_RATE else waveform


class Transcriber:
    """Checkpoint(s) + tokenizer + feature stats -> text.

    Args:
        checkpoints: one checkpoint, or several to average.
        tokenizer_path, stats_path: the training run's SentencePiece model and feature stats JSON.
        num_mel_bins: F of the training features.
        method, beam, max_symbols_per_frame: see `asr_plugin.decoding.decode`.
    """

    def __init__(self, checkpoints: Sequence[str | os.PathLike], tokenizer_path: str | os.PathLike,
                 stats_path: str | os.PathLike, num_mel_bins: int = 80, method: str = "beam", beam: int = 4,
                 max_symbols_per_frame: int = 4, device: str = "cpu") -> None:
        self.model, _ = load_model(list(checkpoints), device)
        self.tokenizer = Tokenizer(tokenizer_path)
        if self.tokenizer.vocab_size != self.model.vocab_size:
            raise ValueError(f"tokenizer {tokenizer_path} has {self.tokenizer.vocab_size} tokens, the model {self.model.vocab_size}")
        self.featurizer = LogMelFeatures(num_mel_bins=num_mel_bins).to(device)
        self.normalize = GlobalNormalize(FeatureStats.load(stats_path)).to(device)
        self.options = {"method": method, "beam": beam, "max_symbols_per_frame": max_symbols_per_frame}
        self.device = device

    @torch.no_grad()
    def transcribe(self, paths: Sequence[str | os.PathLike]) -> list[str]:
        """One text per file, in order (decoded as one padded batch)."""
        features = [self.normalize(self.featurizer(read_audio(p).to(self.device))) for p in paths]  # (T_i, F)
        lengths = torch.tensor([f.shape[0] for f in features], device=self.device)
        padded = torch.nn.utils.rnn.pad_sequence(features, batch_first=True)  # (B, T, F)
        encoder_out, encoder_lengths = self.model.encode(padded, lengths)
        hyps = decode(self.model, encoder_out, encoder_lengths, tokenizer=self.tokenizer, **self.options)
        return [hyp.text or "" for hyp in hyps]
