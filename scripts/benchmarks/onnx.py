"""WER and real-time factor of a model's greedy search against sherpa-onnx decoding its ONNX export (float, int8).

Every utterance of the manifest is decoded alone (batch 1) by each of:

- "ours greedy": the checkpoint's front end, encoder and `greedy_search` in PyTorch (the recipe's transcripts,
  with sherpa-onnx's cap on tokens per frame);
- "sherpa-onnx float" / "sherpa-onnx int8": ``sherpa_onnx.OfflineRecognizer.from_transducer`` on the
  `export_onnx` files, features computed by sherpa-onnx itself.

With ``streaming`` (a cache-aware model on the "sherpa_online" front end), per lookahead (the one asked for, else
every streaming context of the model), each utterance is fed in 100 ms pieces to:

- "ours streaming": the recipe's `StreamingRecognizer` (online features as the audio arrives, the cache-aware
  encoder, greedy search with sherpa-onnx's cap), finished: every frame decoded (`recipe_streaming`);
- "ours on sherpa's windows": the same search on the frames sherpa-onnx's windows cover, the audio before
  `tail_padding_samples` of silence (`streaming_on_sherpa_windows`: what the export is exact to);
- "sherpa-onnx float" / "sherpa-onnx int8": ``sherpa_onnx.OnlineRecognizer.from_transducer`` on the
  `export_onnx_streaming` files in ``OUT/<left>_<right>/``, fed the audio with each window decoded as soon as it
  is ready, then the same tail silence and the end of input, as sherpa-onnx's examples do (`online_transcribe`).

With ``pause_after`` every utterance's audio is followed by that many seconds of silence, for every method (a
pause after speech, as a live stream has one; the synthetic corpus' speech runs to its last sample).

RTF = decoding wall time (features included, reading the audio not) / audio duration (the pause included), on `num_threads` threads
for both runtimes. "equal to X" is the share of utterances whose transcript equals X's.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from asr_plugin.audio import load_audio
from asr_plugin.data import read_manifest
from asr_plugin.data.sources.nemo_manifest import read_nemo_manifest
from asr_plugin.evaluation.scoring import Recognition, score
from asr_plugin.export import export_onnx, export_onnx_streaming
from asr_plugin.export.onnx_streaming import lookahead_dir_name
from asr_plugin.export.sherpa_decode import (
    greedy_on_training_features,
    onnx_metadata,
    sherpa_recognizer,
    sherpa_transcribe,
)
from asr_plugin.export.sherpa_online_decode import (
    online_recognizer,
    online_transcribe,
    recipe_streaming,
    streaming_on_sherpa_windows,
    tail_padding_samples,
)
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend


def _utterances(manifest: Path) -> list[tuple[str, str, torch.Tensor]]:
    """(id, transcript, 16 kHz audio) of each line of `manifest`: this project's JSON lines (id, path, duration,
    text) or a NeMo manifest (audio_filepath, duration, text, optional offset); ValueError naming the NeMo lines
    that cannot be used."""
    with manifest.open("rb") as handle:
        first = next((line for line in handle if line.strip()), b"{}")
    if "audio_filepath" not in json.loads(first):
        return [(e.id, e.text, load_audio(e.path)) for e in read_manifest(manifest)]
    candidates, skipped = read_nemo_manifest(manifest)
    if skipped:
        raise ValueError(
            f"{manifest}: lines that cannot be used: " + "; ".join(f"{s.path}: {s.reason}" for s in skipped)
        )
    return [(c.id, c.text, load_audio(c.path, offset=c.offset, duration=c.duration)) for c in candidates]


def _test_set(
    manifest: str | os.PathLike, limit: int | None, normalize: Callable[[str], str], pause_after: float = 0.0
) -> tuple[list[Recognition], list[np.ndarray], float]:
    """The manifest's first `limit` utterances as references (their transcripts normalised by the model's
    tokenizer, `normalize`, as eval.py scores them), their waveforms (each followed by `pause_after` seconds of
    silence) and their total duration in seconds."""
    utterances = _utterances(Path(manifest))[:limit]
    pause = np.zeros(round(pause_after * 16000), dtype=np.float32)
    references = [Recognition(key, normalize(text), "") for key, text, _ in utterances]
    waveforms = [np.concatenate([audio.numpy(), pause]) for _, _, audio in utterances]
    return references, waveforms, sum(len(w) for w in waveforms) / 16000


def measured_rows(
    methods: dict[str, Callable[[np.ndarray], str]],
    references: Sequence[Recognition],
    waveforms: Sequence[np.ndarray],
    seconds: float,
    agree_with: Sequence[str],
) -> list[dict]:
    """Decodes every waveform with each method in turn: one row per method, {"method", "wer", "rtf",
    "utterances", "agree": {reference: share of transcripts equal to that method's}}."""
    texts, elapsed = {}, {}
    for name, decode in methods.items():
        start = time.perf_counter()
        texts[name] = [" ".join(decode(w).split()) for w in waveforms]
        elapsed[name] = time.perf_counter() - start
    return [
        {
            "method": name,
            "wer": score([replace(r, hyp=t) for r, t in zip(references, texts[name])]).wer,
            "rtf": elapsed[name] / seconds,
            "agree": {ref: float(np.mean([a == b for a, b in zip(texts[name], texts[ref])])) for ref in agree_with},
            "utterances": len(references),
        }
        for name in methods
    ]


def benchmark_onnx(
    source: str | os.PathLike,
    manifest: str | os.PathLike,
    out_dir: str | os.PathLike,
    num_threads: int = 1,
    limit: int | None = None,
    pause_after: float = 0.0,
) -> list[dict]:
    """Exports `source` (a checkpoint or .nemo) into `out_dir` (kept if it is already there) and decodes
    `manifest`, each utterance followed by `pause_after` seconds of silence; returns `measured_rows` (agreement
    with "ours greedy")."""
    loaded = read_model(source)
    spec, tokenizer = loaded.require_frontend_spec(), loaded.require_tokenizer()
    out_dir = Path(out_dir)
    if not (out_dir / "tokens.txt").exists():
        export_onnx(loaded.model, spec, tokenizer, out_dir, int8=True)
    references, waveforms, seconds = _test_set(manifest, limit, tokenizer.normalize, pause_after)
    torch.set_num_threads(num_threads)
    frontend = build_frontend(spec).eval()

    def ours(waveform):
        return tokenizer.decode(greedy_on_training_features(loaded.model, frontend, waveform))

    methods = {"ours greedy": ours}
    for name, int8 in (("sherpa-onnx float", False), ("sherpa-onnx int8", True)):
        recognizer = sherpa_recognizer(out_dir, int8=int8, num_threads=num_threads)
        methods[name] = lambda waveform, recognizer=recognizer: sherpa_transcribe(recognizer, [waveform])[0]
    return measured_rows(methods, references, waveforms, seconds, ["ours greedy"])


def benchmark_onnx_streaming(
    source: str | os.PathLike,
    manifest: str | os.PathLike,
    out_dir: str | os.PathLike,
    att_context_size: list[int] | None = None,
    num_threads: int = 1,
    limit: int | None = None,
    pause_after: float = 0.0,
) -> list[dict]:
    """Exports each lookahead of `source` (`att_context_size`, else every streaming context) into
    ``out_dir/<left>_<right>/`` (kept if already there) and decodes `manifest`, each utterance followed by
    `pause_after` seconds of silence, as the module docstring says; returns `measured_rows` with a "lookahead"
    key (agreement with both of ours)."""
    loaded = read_model(source)
    spec, tokenizer, model = loaded.require_frontend_spec(), loaded.require_tokenizer(), loaded.model
    contexts = (
        [model.encoder.checked_context(att_context_size)] if att_context_size else model.encoder.streaming_contexts
    )
    if not contexts:  # before any work, rather than an empty table at its end
        raise ValueError(
            f"{source}: the model's contexts {[list(c) for c in model.encoder.att_context_sizes]} are all full "
            "context, nothing streams: --streaming needs a model trained with a limited attention context "
            "(experiment=mini_streaming, docs/streaming.md); without --streaming it is benchmarked offline"
        )
    references, waveforms, seconds = _test_set(manifest, limit, tokenizer.normalize, pause_after)
    torch.set_num_threads(num_threads)
    frontend = build_frontend(spec).eval()
    rows = []
    for context in contexts:
        directory = Path(out_dir) / lookahead_dir_name(context)
        if not (directory / "tokens.txt").exists():
            export_onnx_streaming(model, spec, tokenizer, directory, context, int8=True)
        meta = onnx_metadata(directory / "encoder.onnx")
        padding = tail_padding_samples(int(meta["window_size"]), int(meta["chunk_shift"]))

        def ours(waveform, context=context):
            return recipe_streaming(model, context, frontend, waveform, tokenizer).text

        def on_windows(waveform, context=context, padding=padding):
            audio = torch.from_numpy(np.concatenate([waveform, np.zeros(padding, np.float32)]))[None]
            features, frames = frontend(audio, torch.tensor([audio.shape[1]]))
            return streaming_on_sherpa_windows(model, context, features[0, : int(frames)], tokenizer).text

        methods = {"ours streaming": ours, "ours on sherpa's windows": on_windows}
        for name, int8 in (("sherpa-onnx float", False), ("sherpa-onnx int8", True)):
            recognizer = online_recognizer(directory, int8=int8, num_threads=num_threads)

            def sherpa(waveform, recognizer=recognizer, padding=padding):
                return online_transcribe(recognizer, waveform, padding)

            methods[name] = sherpa
        agree_with = ["ours streaming", "ours on sherpa's windows"]
        rows += [
            {**row, "lookahead": list(context)}
            for row in measured_rows(methods, references, waveforms, seconds, agree_with)
        ]
    return rows


def table(rows: list[dict]) -> str:
    """A Markdown table of `benchmark_onnx`'s or `benchmark_onnx_streaming`'s rows."""
    references = list(rows[0]["agree"])
    lookahead = "lookahead" in rows[0]
    header = ["lookahead"] * lookahead + ["method", "WER %", "RTF"] + [f"transcripts equal to {r}" for r in references]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for r in rows:
        cells = [str(r["lookahead"])] if lookahead else []
        cells += [r["method"], f"{r['wer']:.2f}", f"{r['rtf']:.4f}"]
        cells += [f"{100 * r['agree'][ref]:.1f} % of {r['utterances']}" for ref in references]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
