"""Latency and speed of cache-aware streaming, per lookahead, and memory over a long stream (scripts/
benchmark_streaming.py; docs/streaming.md, "Latency and speed").

For each attention context a model can stream with, every utterance is streamed alone (one stream, endpointing
off: one segment) through the model's session (`asr_plugin.evaluation.streaming_session`) on `threads` CPU threads
(``torch.set_num_threads``; 1 by default), fed in pieces that end where each encoder chunk's audio is complete
(`chunk_boundaries`: its last feature frame's window), so every call runs one encoder step as soon as it can.
Measured:

- **algorithmic latency**: the audio a step waits for (`StreamingLatency.algorithmic_ms`: the chunk, any lookahead
  frames past it, the feature window's reach past its hop); compute time not counted;
- **per-chunk compute**: the wall time of each call that ran an encoder step (features, encoder step, greedy
  decoding, endpoint check), its median and 99th percentile;
- **real-time factor**: all the calls' wall time over the audio's duration;
- **first- and last-token emission delay**: the audio fed when the streamed hypothesis's first (last) token came
  out (a token the end of the audio releases: the audio's length), minus the end of the encoder frame where the
  offline forced alignment puts the transcript's first (last) token (at most the audio's length); means over the
  utterances. The alignment is the best path of the offline model's lattice: an RNN-T Viterbi alignment (`viterbi_frames`,
  float64 over the (T, U+1) lattice; torchaudio's ``forced_align`` is CTC's and does not apply) of the reference
  transcript (a manifest's text; for bare audio files, the offline model's own greedy transcript) on the model's
  full-context forward when it has that context among its own, else on its masked forward at its default context.
  TDT models get no delays (their lattice's Viterbi path is not written here);
- **end of audio to final result**: the wall time of the session's ``finish`` (the flush of the features and the
  last encoder steps), median over utterances;
- **WER** against the manifest's transcripts (none for bare audio files).

Then **memory**: one stream of `memory_seconds` (the inputs' audio repeated), fed 100 ms at a time at the model's
default context with endpointing on (as ``transcribe.py --streaming`` runs), the process's resident set size (RSS,
``/proc/self/statm``) sampled every 10 s of audio; the growth is the last sample minus the first after the warm-up
(a tenth of the stream, at most 60 s).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from asr_plugin.audio import load_audio
from asr_plugin.data import read_manifest
from asr_plugin.decoding import greedy_search, subsampling_factor
from asr_plugin.evaluation.decoding_settings import decoding_settings, model_tokenizer
from asr_plugin.evaluation.scoring import Recognition, score
from asr_plugin.evaluation.streaming_session import StreamingMode, StreamingSession, build_session
from asr_plugin.evaluation.streaming_transcriber import PIECE_MS, piece_samples, texts_so_far
from asr_plugin.formats import LoadedModel, read_model
from asr_plugin.frontend.spec import build_frontend
from asr_plugin.losses import TDT
from benchmarks.tiny_streaming import STREAMING, save_model_checkpoint, small_tokenizer, speechlike_audio, write_audio

MANIFEST_SUFFIXES = (".json", ".jsonl")
SAMPLE_EVERY_S = 10.0  # audio between two RSS samples of the memory stream
WARM_UP_S = 60.0  # at most; a tenth of the stream when shorter
QUICK_SECONDS = (2.3, 3.1, 1.7)  # --quick's utterances
QUICK_MEMORY_S = 30.0


@dataclass
class Utterance:
    id: str
    audio: torch.Tensor  # (N,) float32 at the model's rate
    text: str | None  # the reference transcript, None for a bare audio file


@dataclass
class Streamed:
    """One utterance streamed: its final text and the measurements."""

    text: str
    step_seconds: list[float]  # each call that ran an encoder step
    total_seconds: float  # every call, `finish` included
    finish_seconds: float
    first_emission_s: float | None  # audio fed when the first token came out (None: no token)
    last_emission_s: float | None


def viterbi_frames(token_scores: torch.Tensor, blank_scores: torch.Tensor) -> list[int]:
    """The frame of each token on the best RNN-T path through a (T, U+1) lattice (float64).

    Args:
        token_scores: (T, U+1) log P(y_{u+1} | t, u) (column U unused).
        blank_scores: (T, U+1) log P(blank | t, u).
    Returns:
        U frames, non-decreasing: token u is emitted at frame t (a blank leaves (t, u) for (t + 1, u), a token
        (t, u) for (t, u + 1); the path starts at (0, 0) and ends with the blank of (T - 1, U)).

    Each frame's row is a max-plus prefix scan: with a(u) = alpha(t - 1, u) + b(t - 1, u) and C(u) the sum of the
    frame's token scores before u, alpha(t, u) = C(u) + max_{k <= u} (a(k) - C(k)), which ``cummax`` computes with
    its argmax k, where the path entered the frame.
    """
    frames, columns = token_scores.shape
    y, b = token_scores.double(), blank_scores.double()
    entry = torch.zeros(frames, columns, dtype=torch.long)  # where the best path to (t, u) entered frame t
    arrive = torch.full((columns,), -torch.inf, dtype=torch.float64)
    arrive[0] = 0.0
    for t in range(frames):
        prefix = torch.cat([torch.zeros(1, dtype=torch.float64), y[t, :-1].cumsum(0)])  # (U+1,) C(u)
        best, where = torch.cummax(arrive - prefix, dim=0)
        alpha = prefix + best
        entry[t] = where
        arrive = alpha + b[t]
    tokens, t, u = [0] * (columns - 1), frames - 1, columns - 1
    while u > 0:
        k = int(entry[t, u])
        tokens[k:u] = [t] * (u - k)
        u, t = k, t - 1
    return tokens


@torch.no_grad()
def aligned_frames(loaded: LoadedModel, features: torch.Tensor, tokens: list[int], context) -> list[int]:
    """The frame of each of `tokens` on the best path of the model's lattice for (1, T, F) `features` under the
    encoder context `context`."""
    model = loaded.model
    encoded, _ = model.encode(features, torch.tensor([features.shape[1]]), context)  # (1, T, H_e)
    predicted = model.predictor(torch.tensor([tokens], dtype=torch.long))  # (1, U+1, H_p)
    token_scores, blank_scores = [], []
    target = torch.tensor(tokens + [model.blank_id])[None, None, :, None]  # (1, 1, U+1, 1); column U unused
    for start in range(0, encoded.shape[1], 64):  # (1, 64, U+1, V) at a time
        log_probs = model.joint(encoded[:, start : start + 64], predicted).double().log_softmax(-1)
        token_scores.append(log_probs.gather(-1, target.expand(*log_probs.shape[:3], 1))[0, ..., 0])
        blank_scores.append(log_probs[0, ..., model.blank_id])
    return viterbi_frames(torch.cat(token_scores), torch.cat(blank_scores))


def chunk_boundaries(session: StreamingSession, samples: int) -> list[int]:
    """Where the pieces end that complete one encoder chunk each (the last one at `samples`): a chunk is complete
    once the window of its last feature frame m has arrived, hop * m + the extractor's reach samples."""
    setup, features = session.recognizer.encoder.setup, session.recognizer.features
    hop = features.frontend.hop_length
    ends, last = [], setup.first_chunk_frames - 1  # the first chunk's last feature frame
    while (end := hop * last + features.reach) < samples:
        ends.append(end)
        last += setup.chunk_frames
    return ends + [samples]


def stream_utterance(session: StreamingSession, audio: torch.Tensor) -> Streamed:
    """`audio` fed to a fresh stream in pieces that each complete an encoder chunk, each call timed."""
    recognizer, rate = session.recognizer, session.sample_rate
    state = recognizer.initial_state(1)
    steps, total, emissions, fed = [], 0.0, [], 0
    with torch.no_grad():
        for end in chunk_boundaries(session, audio.shape[0]):
            chunk = audio[fed:end]
            frames_before = int(state.decoder.frames_done[0])
            began = time.perf_counter()
            state = recognizer.accept(chunk[None], torch.tensor([chunk.shape[0]]), state)
            elapsed = time.perf_counter() - began
            total += elapsed
            fed += chunk.shape[0]
            if int(state.decoder.frames_done[0]) > frames_before:
                steps.append(elapsed)
            emissions += [fed / rate] * (len(recognizer.partial(state)[0].tokens) - len(emissions))
        began = time.perf_counter()
        state = recognizer.finish(state)
        finish = time.perf_counter() - began
    segments = recognizer.segments(state)[0]
    tokens = sum(len(segment.hypothesis.tokens) for segment in segments)
    emissions += [fed / rate] * (tokens - len(emissions))
    return Streamed(
        text=texts_so_far(recognizer, state)[0],
        step_seconds=steps,
        total_seconds=total + finish,
        finish_seconds=finish,
        first_emission_s=emissions[0] if emissions else None,
        last_emission_s=emissions[-1] if emissions else None,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) of `values`, linearly interpolated."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def reference_alignments(
    loaded: LoadedModel, utterances: Sequence[Utterance]
) -> tuple[list[tuple[float, float] | None], str]:
    """Each utterance's (first, last) token time in seconds on the offline model's best path (None where its
    transcript has no token, or for a TDT model) and what was aligned, in words."""
    model = loaded.model
    contexts = [tuple(c) for c in getattr(model.encoder, "att_context_sizes", [(-1, -1)])]
    context = (-1, -1) if (-1, -1) in contexts else tuple(model.encoder.att_context_size)
    where = "full-context forward" if context == (-1, -1) else f"masked forward at {list(context)}"
    if isinstance(model.lattice, TDT):
        return [None] * len(utterances), "none (a TDT model)"
    tokenizer = model_tokenizer(loaded)
    frontend = build_frontend(loaded.require_frontend_spec()).eval()
    shift = subsampling_factor(model) * frontend.hop_length / frontend.sample_rate  # seconds per encoder frame
    cap = loaded.decoding["max_symbols_per_frame"]
    times = []
    for utterance in utterances:
        with torch.no_grad():
            features, _ = frontend(utterance.audio[None], torch.tensor([utterance.audio.shape[0]]))
            if utterance.text is None:
                encoded = model.encode(features, torch.tensor([features.shape[1]]), context)
                tokens = greedy_search(model, *encoded, cap)[0].tokens
            else:
                tokens = tokenizer.encode(tokenizer.normalize(utterance.text))
        if not tokens:
            times.append(None)
            continue
        frames = aligned_frames(loaded, features, tokens, context)
        seconds = utterance.audio.shape[0] / frontend.sample_rate  # the last frame may reach past the audio
        times.append((min((frames[0] + 1) * shift, seconds), min((frames[-1] + 1) * shift, seconds)))
    what = "reference transcripts" if all(u.text is not None for u in utterances) else "offline greedy transcripts"
    return times, f"RNN-T Viterbi (float64) of the {what} on the {where}"


def resident_bytes() -> int:
    """The process's resident set size now (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_over_stream(session: StreamingSession, utterances: Sequence[Utterance], seconds: float) -> dict:
    """RSS sampled over one stream of `seconds` of the utterances' audio repeated, fed 100 ms at a time."""
    recognizer, rate = session.recognizer, session.sample_rate
    piece = piece_samples(PIECE_MS, rate)
    source = torch.cat([utterance.audio for utterance in utterances])
    total = int(seconds * rate)
    warm_up = min(WARM_UP_S, seconds / 10) * rate
    state, samples, fed, next_sample = recognizer.initial_state(1), [], 0, 0
    with torch.no_grad():
        while fed < total:
            start = fed % source.shape[0]
            chunk = source[start : start + min(piece, total - fed)]
            state = recognizer.accept(chunk[None], torch.tensor([chunk.shape[0]]), state)
            fed += chunk.shape[0]
            if fed >= next_sample:
                samples.append((fed / rate, resident_bytes()))
                next_sample += SAMPLE_EVERY_S * rate
        recognizer.finish(state)
    samples.append((fed / rate, resident_bytes()))
    after = [(t, rss) for t, rss in samples if t * rate >= warm_up]
    return {
        "seconds": fed / rate,
        "warm_up_s": warm_up / rate,
        "rss_start": after[0][1],
        "rss_end": after[-1][1],
        "rss_peak": max(rss for _, rss in after),
        "samples": len(after),
        "context": list(session.mode.att_context_size),
    }


def read_inputs(inputs: Sequence[str | os.PathLike], sample_rate: int, limit: int | None) -> list[Utterance]:
    """A manifest's utterances (with their transcripts) or bare audio files (without)."""
    if len(inputs) == 1 and Path(inputs[0]).suffix in MANIFEST_SUFFIXES:
        entries = read_manifest(inputs[0])[:limit]
        return [Utterance(e.id, e.load_audio(sample_rate), e.text) for e in entries]
    return [Utterance(Path(p).name, load_audio(p, sample_rate), None) for p in list(inputs)[:limit]]


def benchmark_streaming(
    source: str | os.PathLike,
    inputs: Sequence[str | os.PathLike],
    contexts: Sequence[tuple[int, int]] | None = None,
    memory_seconds: float = 600.0,
    threads: int = 1,
    limit: int | None = None,
) -> dict:
    """The measurements of the module docstring for the model file `source` on `inputs` (one manifest, or audio
    files): ``{"rows": one dict per context, "memory": ..., "alignment": ..., "source": ...}``."""
    torch.set_num_threads(threads)
    loaded = read_model(source)
    contexts = list(contexts) if contexts else loaded.model.encoder.streaming_contexts
    if not contexts:
        # the session's error: a full-context model, offering buffered streaming
        build_session(loaded, StreamingMode("cache_aware", (-1, -1), endpointing=True), 1)
    cap = decoding_settings(loaded, {})["max_symbols_per_frame"]
    sessions = [build_session(loaded, StreamingMode("cache_aware", c, endpointing=False), cap) for c in contexts]
    utterances = read_inputs(inputs, sessions[0].sample_rate, limit)
    if not utterances:
        raise ValueError(f"{list(inputs)}: no utterance to stream")
    alignments, alignment = reference_alignments(loaded, utterances)
    audio_s = sum(u.audio.shape[0] for u in utterances) / sessions[0].sample_rate
    rows = []
    for session in sessions:
        streamed = [stream_utterance(session, u.audio) for u in utterances]
        steps = [s for one in streamed for s in one.step_seconds]
        delays = [
            (one.first_emission_s - times[0], one.last_emission_s - times[1])
            for one, times in zip(streamed, alignments)
            if times is not None and one.first_emission_s is not None
        ]
        references = [Recognition(u.id, u.text, one.text) for u, one in zip(utterances, streamed) if u.text]
        rows.append(
            {
                "att_context_size": list(session.mode.att_context_size),
                "chunk_ms": session.latency.chunk_ms,
                "algorithmic_ms": session.latency.algorithmic_ms,
                "step_p50_ms": 1000 * percentile(steps, 50),
                "step_p99_ms": 1000 * percentile(steps, 99),
                "rtf": sum(one.total_seconds for one in streamed) / audio_s,
                "first_delay_ms": 1000 * statistics.mean(d[0] for d in delays) if delays else None,
                "last_delay_ms": 1000 * statistics.mean(d[1] for d in delays) if delays else None,
                "final_ms": 1000 * statistics.median(one.finish_seconds for one in streamed),
                "wer": score(references).wer if len(references) == len(utterances) else None,
                "utterances": len(utterances),
            }
        )
    memory_session = build_session(loaded, StreamingMode("cache_aware", None, endpointing=True), cap)
    memory = memory_over_stream(memory_session, utterances, memory_seconds) if memory_seconds > 0 else None
    return {"rows": rows, "memory": memory, "alignment": alignment, "source": str(source), "threads": threads}


def quick_benchmark() -> dict:
    """`benchmark_streaming` on a tiny random cache-aware model (benchmarks.tiny_streaming) and synthetic audio, with a
    30 s memory stream: the table's shape, in seconds (its numbers mean nothing)."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        checkpoint = root / "tiny_streaming.ckpt"
        save_model_checkpoint(checkpoint, small_tokenizer(root), STREAMING)
        audio = [write_audio(root / f"{i}.wav", speechlike_audio(s, i)) for i, s in enumerate(QUICK_SECONDS)]
        return benchmark_streaming(checkpoint, audio, memory_seconds=QUICK_MEMORY_S)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(result: dict) -> str:
    """A Markdown table of `benchmark_streaming`'s rows, then the memory and alignment lines."""
    lines = [
        "| att_context_size | chunk ms | algorithmic latency ms | chunk compute p50 / p99 ms | RTF "
        f"({result['threads']} thread{'s' if result['threads'] > 1 else ''}) | first-token delay ms | last-token "
        "delay ms | end of audio to final ms | WER % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        wer = "-" if r["wer"] is None else f"{r['wer']:.2f}"
        lines.append(
            f"| {r['att_context_size']} | {r['chunk_ms']:.0f} | {r['algorithmic_ms']:.1f} | "
            f"{r['step_p50_ms']:.2f} / {r['step_p99_ms']:.2f} | {r['rtf']:.4f} | {_ms(r['first_delay_ms'])} | "
            f"{_ms(r['last_delay_ms'])} | {r['final_ms']:.2f} | {wer} |"
        )
    rows = result["rows"]
    lines.append("")
    lines.append(f"{rows[0]['utterances']} utterances; emission delays against the {result['alignment']}.")
    memory = result["memory"]
    if memory is not None:
        mib = 2**20
        growth = memory["rss_end"] - memory["rss_start"]
        lines.append(
            f"Memory over a {memory['seconds']:.0f} s stream at {memory['context']} (100 ms pieces, endpointing on): "
            f"RSS {memory['rss_start'] / mib:.1f} MiB after {memory['warm_up_s']:.0f} s, {memory['rss_end'] / mib:.1f} "
            f"MiB at the end (peak {memory['rss_peak'] / mib:.1f} MiB), growth {growth / mib:+.1f} MiB over "
            f"{memory['samples']} samples."
        )
    return "\n".join(lines)
