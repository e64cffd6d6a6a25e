"""WER and decoding speed of greedy and beam search, ours and (with ``nemo=True``) NeMo's, on the same model file
and utterances, measured side by side in one process.

For a model file (a checkpoint, or a ``.nemo``, which NeMo restores too): the utterances (sorted by length,
`batch_size` at a time) are encoded once, by our front end and encoder for our searches and by NeMo's
preprocessor and encoder for NeMo's, and only the decoding of those encoder outputs is timed: our `greedy_search`
and `beam_search` at beams 1, 4 and 8 (the model's own ``max_symbols_per_frame``), NeMo's ``greedy_batch`` (label
looping) and ``malsd_batch`` at the same beams and cap, both sides with the same `score_norm` (on: the final
choice by score / (tokens + 1), both sides' default; off: by score).
Each method runs `repeats` times; within a repeat every batch is decoded by ours, then by NeMo, so that the
machine's load falls on both alike, and a side's speed is its fastest repeat. WER is against the manifest's
transcripts, both sides normalised by the model's tokenizer. The manifest is ours (JSON lines with ``path``) or
NeMo's (``audio_filepath``, relative to the manifest's folder).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from asr_plugin.audio import load_audio
from asr_plugin.data import read_manifest
from asr_plugin.data.sources.nemo_manifest import resolve_audio_path
from asr_plugin.decoding import beam_search, greedy_search
from asr_plugin.evaluation.decoding_settings import decoding_settings, model_tokenizer
from asr_plugin.evaluation.scoring import Recognition, score
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend

BEAMS = (1, 4, 8)
METHODS = ("greedy", *(f"beam {k}" for k in BEAMS))


@dataclass(frozen=True)
class Row:
    """One line of the table: a method's WER (%) and utterances per second, ours and NeMo's (None without)."""

    model: str
    lattice: str
    method: str
    wer: float
    utterances_per_second: float
    nemo_wer: float | None = None
    nemo_utterances_per_second: float | None = None


Batches = list[tuple[list[int], torch.Tensor, torch.Tensor]]  # (utterance indices, encoder output, lengths)
Decode = Callable[[torch.Tensor, torch.Tensor], list[str]]  # a batch's encoder output and lengths -> texts


def batched(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Utterance indices sorted by length, `batch_size` at a time."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def manifests_utterances(paths: Sequence[str | os.PathLike], sample_rate: int) -> tuple[list[torch.Tensor], list[str]]:
    """`manifest_utterances` of several manifests, one after the other."""
    audio: list[torch.Tensor] = []
    texts: list[str] = []
    for path in paths:
        more_audio, more_texts = manifest_utterances(path, sample_rate)
        audio, texts = audio + more_audio, texts + more_texts
    return audio, texts


def manifest_utterances(path: str | os.PathLike, sample_rate: int) -> tuple[list[torch.Tensor], list[str]]:
    """(the (N,) audio at `sample_rate`, the transcript) of every utterance of our or NeMo's manifest, in order."""
    path = Path(path)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] if path.is_file() else []
    if not lines or "audio_filepath" not in json.loads(lines[0]):
        entries = read_manifest(path)  # ours: FileNotFoundError/ValueError naming the file
        return [entry.load_audio(sample_rate) for entry in entries], [entry.text for entry in entries]
    records = [json.loads(line) for line in lines]
    audio = [
        load_audio(resolve_audio_path(r["audio_filepath"], path), sample_rate, r.get("offset"), r.get("duration"))
        if r.get("offset")
        else load_audio(resolve_audio_path(r["audio_filepath"], path), sample_rate)
        for r in records
    ]
    return audio, [str(r["text"]) for r in records]


def side_by_side(sides: Sequence[tuple[Batches, Decode]], count: int, repeats: int) -> list[tuple[list[str], float]]:
    """Each side's texts (utterance order) and fastest total decoding seconds over `repeats`, every batch decoded
    by each side in turn."""
    texts = [[""] * count for _ in sides]
    best = [math.inf] * len(sides)
    for _ in range(repeats):
        totals = [0.0] * len(sides)
        for i in range(len(sides[0][0])):
            for side, (batches, decode) in enumerate(sides):
                indices, encoded, lengths = batches[i]
                start = time.perf_counter()
                out = decode(encoded, lengths)
                totals[side] += time.perf_counter() - start
                for index, text in zip(indices, out):
                    texts[side][index] = text
        best = [min(b, t) for b, t in zip(best, totals)]
    return list(zip(texts, best))


@torch.no_grad()
def benchmark_model(
    path: str | os.PathLike,
    manifests: Sequence[str | os.PathLike],
    batch_size: int = 16,
    limit: int | None = None,
    nemo: bool = False,
    repeats: int = 3,
    score_norm: bool = True,
) -> list[Row]:
    """The rows of one model file on the utterances of `manifests` (module docstring); `nemo`: NeMo's too (the
    file must be a ``.nemo``)."""
    if nemo and not str(path).endswith(".nemo"):
        raise ValueError(f"{path}: the comparison with NeMo needs a .nemo file")
    loaded = read_model(path)
    model, tokenizer = loaded.model.eval(), model_tokenizer(loaded)
    cap = decoding_settings(loaded, {})["max_symbols_per_frame"]
    frontend = build_frontend(loaded.require_frontend_spec()).eval()
    audio, texts = manifests_utterances(manifests, frontend.sample_rate)
    audio, refs = audio[:limit], [tokenizer.normalize(text) for text in texts[:limit]]
    groups = batched([a.shape[0] for a in audio], batch_size)

    def padded(indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([audio[i].shape[0] for i in indices])
        return torch.nn.utils.rnn.pad_sequence([audio[i] for i in indices], batch_first=True), lengths

    ours: Batches = [(g, *model.encode(*frontend(*padded(g)))) for g in groups]
    our_methods: dict[str, Decode] = {
        "greedy": lambda e, n: [h.text for h in greedy_search(model, e, n, cap, tokenizer)],
        **{
            f"beam {k}": (
                lambda e, n, k=k: [h.text for h in beam_search(model, e, n, k, tokenizer, cap, score_norm=score_norm)]
            )
            for k in BEAMS
        },
    }
    nemo_side = NemoSide(path, groups, padded, cap, score_norm) if nemo else None
    lattice = "tdt" if model.lattice.num_extra_outputs else "rnnt"
    rows = []
    for method in METHODS:
        sides = [(ours, our_methods[method])] + ([] if nemo_side is None else [nemo_side.method(method)])
        results = side_by_side(sides, len(audio), repeats)
        wers = [word_error_rate(side_texts, refs, tokenizer) for side_texts, _ in results]
        speeds = [len(audio) / seconds if seconds else 0.0 for _, seconds in results]
        rows.append(Row(os.path.basename(str(path)), lattice, method, wers[0], speeds[0], *wers[1:], *speeds[1:]))
    return rows


def word_error_rate(texts: Sequence[str], refs: Sequence[str], tokenizer) -> float:
    """The corpus WER (%) of `texts` normalised by `tokenizer` against the normalised `refs`."""
    return score(
        [Recognition(str(i), ref, tokenizer.normalize(text)) for i, (ref, text) in enumerate(zip(refs, texts))]
    ).wer


class NemoSide:
    """NeMo's restore of the ``.nemo`` file, its encoder output of the same batches, and its decoding per method."""

    def __init__(self, path, groups: list[list[int]], padded, cap: int, score_norm: bool = True) -> None:
        from nemo.collections.asr.models import ASRModel
        from omegaconf import OmegaConf

        from benchmarks.nemo_decoding import nemo_encode

        self.nemo = ASRModel.restore_from(str(path), map_location="cpu").eval()
        self.saved = OmegaConf.to_container(self.nemo.cfg.decoding, resolve=True)
        self.cap, self.score_norm = cap, score_norm
        self.batches: Batches = [(g, *nemo_encode(self.nemo, *padded(g))) for g in groups]

    def method(self, method: str) -> tuple[Batches, Decode]:
        """NeMo's batches and its decoding by `method` ("greedy": greedy_batch; "beam K": malsd_batch at K)."""
        from benchmarks.nemo_decoding import nemo_hypotheses, set_strategy

        beam = int(method.split()[1]) if method.startswith("beam") else 1
        strategy = "greedy_batch" if method == "greedy" else "malsd_batch"
        set_strategy(self.nemo, self.saved, strategy, self.cap, beam, **{"beam.score_norm": self.score_norm})
        return self.batches, lambda e, n: [h.text for h in nemo_hypotheses(self.nemo, e, n)]


def table(rows: Sequence[Row]) -> str:
    """The Markdown table of `rows` (NeMo's columns when any row has them)."""
    with_nemo = any(r.nemo_wer is not None for r in rows)
    if not with_nemo:
        lines = ["| model | lattice | method | WER % | utterances/s |", "|---|---|---|---:|---:|"]
        lines += [
            f"| {r.model} | {r.lattice} | {r.method} | {r.wer:.2f} | {r.utterances_per_second:.1f} |" for r in rows
        ]
        return "\n".join(lines)
    lines = [
        "| model | lattice | method | WER % ours | WER % NeMo | utterances/s ours | utterances/s NeMo | speed ours/NeMo |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = r.utterances_per_second / r.nemo_utterances_per_second if r.nemo_utterances_per_second else 0.0
        lines.append(
            f"| {r.model} | {r.lattice} | {r.method} | {r.wer:.2f} | {r.nemo_wer:.2f} | "
            f"{r.utterances_per_second:.1f} | {r.nemo_utterances_per_second:.1f} | {ratio:.2f} |"
        )
    return "\n".join(lines)
