"""WER and real-time factor of a model's greedy search against sherpa-onnx decoding its ONNX export (float, int8).

Every utterance of the manifest is decoded alone (batch 1) by each of:

- "ours greedy": the checkpoint's front end, encoder and `greedy_search` in PyTorch (the recipe's transcripts,
  with sherpa-onnx's cap on tokens per frame);
- "sherpa-onnx float" / "sherpa-onnx int8": ``sherpa_onnx.OfflineRecognizer.from_transducer`` on the
  `export_onnx` files, features computed by sherpa-onnx itself.

RTF = decoding wall time (features included, reading the audio not) / audio duration, on `num_threads` threads
for both runtimes. "agree" is the share of utterances whose transcript equals ours greedy's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from asr_plugin.data import build_frontend, load_audio, read_manifest
from asr_plugin.evaluation.scoring import Recognition, score
from asr_plugin.export import export_onnx
from asr_plugin.export.sherpa_decode import (
    greedy_on_training_features,
    sherpa_recognizer,
    sherpa_transcribe,
)
from asr_plugin.formats import read_model


def benchmark_onnx(
    source: str | os.PathLike,
    manifest: str | os.PathLike,
    out_dir: str | os.PathLike,
    num_threads: int = 1,
    limit: int | None = None,
) -> list[dict]:
    """Exports `source` (a checkpoint or .nemo) into `out_dir` (kept if it is already there) and decodes
    `manifest`; returns one row per method: {"method", "wer", "rtf", "agree", "utterances"}."""
    loaded = read_model(source)
    spec, tokenizer = loaded.require_frontend_spec(), loaded.require_tokenizer()
    out_dir = Path(out_dir)
    if not (out_dir / "tokens.txt").exists():
        export_onnx(loaded.model, spec, tokenizer, out_dir, int8=True)
    entries = read_manifest(manifest)[:limit]
    waveforms = [load_audio(e.path).numpy() for e in entries]
    seconds = sum(len(w) for w in waveforms) / 16000
    torch.set_num_threads(num_threads)
    frontend = build_frontend(spec).eval()

    def ours(waveform):
        return tokenizer.decode(greedy_on_training_features(loaded.model, frontend, waveform))

    methods = {"ours greedy": ours}
    for name, int8 in (("sherpa-onnx float", False), ("sherpa-onnx int8", True)):
        recognizer = sherpa_recognizer(out_dir, int8=int8, num_threads=num_threads)
        methods[name] = lambda waveform, recognizer=recognizer: sherpa_transcribe(recognizer, [waveform])[0]
    rows, reference = [], None
    for name, decode in methods.items():
        start = time.perf_counter()
        texts = [" ".join(decode(w).split()) for w in waveforms]
        elapsed = time.perf_counter() - start
        reference = reference or texts
        counts = score([Recognition(e.id, e.text, t) for e, t in zip(entries, texts)])
        agree = sum(a == b for a, b in zip(texts, reference)) / len(texts)
        rows.append(
            {"method": name, "wer": counts.wer, "rtf": elapsed / seconds, "agree": agree, "utterances": len(texts)}
        )
    return rows


def table(rows: list[dict]) -> str:
    """A Markdown table of `benchmark_onnx`'s rows."""
    lines = ["| method | WER % | RTF | transcripts equal to ours greedy |", "| --- | --- | --- | --- |"]
    lines += [
        f"| {r['method']} | {r['wer']:.2f} | {r['rtf']:.4f} | {100 * r['agree']:.1f} % of {r['utterances']} |"
        for r in rows
    ]
    return "\n".join(lines)
