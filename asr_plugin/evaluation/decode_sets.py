"""Decoding evaluation sets with several methods, timing them, and writing the result files."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from asr_plugin.data.loading.batch import Batch
from asr_plugin.decoding import METHODS, decode, subsampling_factor
from asr_plugin.decoding.fusion import Fusion
from asr_plugin.decoding.timestamps import PieceTokenizer, attach_timing
from asr_plugin.evaluation.scoring import Recognition, score, write_errs, write_recogs
from asr_plugin.files import write_text_atomic
from asr_plugin.models import Transducer

log = logging.getLogger(__name__)
SUMMARY_COLUMNS = (
    "set",
    "method",
    "wer",
    "errors",
    "ref_words",
    "substitutions",
    "deletions",
    "insertions",
    "utterances",
    "audio_seconds",
    "decode_seconds",
    "rtf",
)
# a streaming evaluation's rows say how each was decoded (asr_plugin.evaluation.streaming_eval); offline rows have none
RUN_COLUMNS = ("mode", "att_context_size", "chunk_ms", "latency_ms")


@dataclass
class SetResult:
    """One (set, method): recognitions and timing (encoder time is shared by the methods and added to each), and
    with timestamps one JSON line per utterance ({"id", "text", "tokens", "words", "segments"}: seconds)."""

    recognitions: list[Recognition] = field(default_factory=list)
    timestamps: list[str] = field(default_factory=list)
    audio_seconds: float = 0.0
    decode_seconds: float = 0.0


@torch.no_grad()
def decode_batches(
    model: Transducer,
    batches: Iterable[Batch],
    methods: Iterable[str],
    tokenizer: PieceTokenizer,
    frame_shift: float,
    device: str | torch.device = "cpu",
    beam: int = 4,
    max_symbols_per_frame: int = 10,
    att_context_size: tuple[int, int] | None = None,
    timestamps: bool = False,
    fusion: Fusion = (),
    score_norm: bool = True,
) -> dict[str, SetResult]:
    """Encodes every batch once and decodes it with each method; returns {method: SetResult}.

    Args:
        frame_shift: seconds per feature frame (audio duration = feature frames * frame_shift).
        att_context_size: the encoder's attention context, one of the model's (None: its default).
        timestamps: also time every hypothesis' tokens, words and segments (`asr_plugin.decoding.timestamps`).
        fusion: shallow-fusion scorers of every method (`asr_plugin.decoding.fusion`; phrase boosting).
        score_norm: beam search chooses by log-probability / (tokens + 1) (`asr_plugin.decoding.beam_search`).
    """
    methods = list(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"decoding.methods={methods}; choose from {METHODS}")
    results = {method: SetResult() for method in methods}
    encoder_frame_shift = frame_shift * subsampling_factor(model) if timestamps else 0.0
    for batch in batches:
        batch = batch.to(device)
        start = time.perf_counter()
        encoder_out, encoder_lengths = model.encode(batch.features, batch.feature_lengths, att_context_size)
        encode_seconds = time.perf_counter() - start
        audio = float(batch.feature_lengths.sum()) * frame_shift
        for method in methods:
            start = time.perf_counter()
            hyps = decode(
                model,
                encoder_out,
                encoder_lengths,
                method,
                tokenizer,
                beam,
                max_symbols_per_frame,
                fusion=fusion,
                score_norm=score_norm,
            )
            result = results[method]
            result.decode_seconds += encode_seconds + time.perf_counter() - start
            result.audio_seconds += audio
            result.recognitions += [
                Recognition(i, ref, hyp.text or "") for i, ref, hyp in zip(batch.ids, batch.texts, hyps)
            ]
            if timestamps:
                timed = attach_timing(hyps, tokenizer, encoder_frame_shift)
                result.timestamps += [
                    json.dumps({"id": i, "text": hyp.text or "", **hyp.timing.record()}, ensure_ascii=False)
                    for i, hyp in zip(batch.ids, timed)
                ]
    return results


def write_set_results(
    results: Mapping[str, SetResult],
    set_name: str,
    out_dir: str | os.PathLike,
    run: Mapping[str, Any] | None = None,
    tag: str = "",
) -> list[dict[str, Any]]:
    """recogs-<set>-<method>.txt and errs-<set>-<method>.txt per method (recogs-<set>-<method>-<tag>.txt with a
    `tag`), and timestamps-<set>-<method>.jsonl where the results were timed; returns summary rows, with `run`'s
    fields (`RUN_COLUMNS`: how the set was decoded) when given."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for method, result in results.items():
        name = f"{set_name}-{method}" + (f"-{tag}" if tag else "")
        write_recogs(result.recognitions, out_dir / f"recogs-{name}.txt")
        write_errs(result.recognitions, out_dir / f"errs-{name}.txt")
        if result.timestamps:
            write_text_atomic(out_dir / f"timestamps-{name}.jsonl", "".join(f"{line}\n" for line in result.timestamps))
        counts = score(result.recognitions)
        rows.append(
            {
                "set": set_name,
                "method": method,
                "wer": round(counts.wer, 2),
                "errors": counts.errors,
                "ref_words": counts.ref_words,
                "substitutions": counts.substitutions,
                "deletions": counts.deletions,
                "insertions": counts.insertions,
                "utterances": len(result.recognitions),
                "audio_seconds": round(result.audio_seconds, 2),
                "decode_seconds": round(result.decode_seconds, 3),
                "rtf": round(result.decode_seconds / result.audio_seconds, 4) if result.audio_seconds else 0.0,
                **(run or {}),
            }
        )
    return rows


def write_summary(
    rows: list[dict[str, Any]], out_dir: str | os.PathLike, extra: Mapping[str, Any]
) -> tuple[Path, Path]:
    """wer-summary.tsv (one row per set and method, and how it was decoded where rows say: `RUN_COLUMNS`) and
    wer-summary.json (rows plus `extra`, e.g. checkpoints), each written to a temporary file and renamed when
    complete."""
    out_dir = Path(out_dir)
    table = io.StringIO()
    columns = SUMMARY_COLUMNS + tuple(column for column in RUN_COLUMNS if any(column in row for row in rows))
    writer = csv.DictWriter(table, fieldnames=columns, delimiter="\t", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    tsv = write_text_atomic(out_dir / "wer-summary.tsv", table.getvalue())
    js = write_text_atomic(out_dir / "wer-summary.json", json.dumps({**extra, "results": rows}, indent=1))
    return tsv, js


def format_table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width table of set, method, WER, errors and RTF (and the mode, context and latency of a streaming
    evaluation's rows)."""
    runs = any("mode" in r for r in rows)
    header = f"{'set':<16} {'method':<8} {'WER%':>7} {'errors':>12} {'ins/del/sub':>14} {'RTF':>7}"
    header += f" {'mode':<12} {'context':<10} {'latency ms':>10}" if runs else ""
    lines = [header, "-" * len(header)]
    for r in rows:
        idsub = f"{r['insertions']}/{r['deletions']}/{r['substitutions']}"
        line = (
            f"{r['set']:<16} {r['method']:<8} {r['wer']:>7.2f} {str(r['errors']) + '/' + str(r['ref_words']):>12} "
            f"{idsub:>14} {r['rtf']:>7.4f}"
        )
        if runs:
            context = "" if r.get("att_context_size") in (None, "") else ",".join(map(str, r["att_context_size"]))
            line += f" {r.get('mode', ''):<12} {context:<10} {str(r.get('latency_ms', '')):>10}"
        lines.append(line)
    return "\n".join(lines)
