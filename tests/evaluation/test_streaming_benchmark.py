"""The streaming benchmark (scripts/benchmark_streaming.py, benchmarks.streaming): the RNN-T Viterbi alignment is
the best path found by enumerating every path of small lattices, the pieces it feeds each complete one encoder
chunk, and --quick prints a table of the expected shape (no timing is asserted)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest
import torch

from asr_plugin.evaluation.streaming_session import StreamingMode, build_session
from asr_plugin.formats import read_model
from benchmarks.streaming import chunk_boundaries, stream_utterance, viterbi_frames
from benchmarks.tiny_streaming import STREAMING, save_model_checkpoint, small_tokenizer, speechlike_audio

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "benchmark_streaming.py"


def best_path_by_enumeration(y: torch.Tensor, b: torch.Tensor) -> list[int]:
    """Every assignment of U tokens to non-decreasing frames, scored as a path of the lattice: at frame t the
    tokens of that frame (y), then the blank that leaves it (b at the column reached)."""
    frames, columns = y.shape
    best, best_frames = -float("inf"), None
    for assignment in itertools.combinations_with_replacement(range(frames), columns - 1):
        total, u = 0.0, 0
        for t in range(frames):
            while u < columns - 1 and assignment[u] == t:
                total += float(y[t, u])
                u += 1
            total += float(b[t, u])
        if total > best:
            best, best_frames = total, list(assignment)
    return best_frames


@pytest.mark.parametrize("frames, tokens, seed", [(1, 3, 0), (4, 1, 1), (5, 3, 2), (6, 4, 3), (3, 5, 4)])
def test_viterbi_frames_is_the_best_path(frames: int, tokens: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    y = torch.randn(frames, tokens + 1, generator=generator, dtype=torch.float64)
    b = torch.randn(frames, tokens + 1, generator=generator, dtype=torch.float64)
    assert viterbi_frames(y, b) == best_path_by_enumeration(y, b)


def test_each_piece_completes_one_encoder_chunk(tmp_path) -> None:
    checkpoint = tmp_path / "tiny.ckpt"
    save_model_checkpoint(checkpoint, small_tokenizer(tmp_path), STREAMING)
    audio = torch.from_numpy(speechlike_audio(2.0, 0))
    for context in [(8, 3), (8, 0)]:
        session = build_session(read_model(checkpoint), StreamingMode("cache_aware", context, endpointing=False), 4)
        ends = chunk_boundaries(session, audio.shape[0])
        streamed = stream_utterance(session, audio)
        # every piece but the last (which the end of the audio completes at `finish`) ran one encoder step
        assert len(streamed.step_seconds) == len(ends) - 1


def test_quick_prints_a_table_of_the_expected_shape(capsys) -> None:
    spec = importlib.util.spec_from_file_location("benchmark_streaming", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| att_context_size | chunk ms | algorithmic latency ms | chunk compute p50 / p99 ms")
    rows = [line.split(" | ") for line in lines[2:5]]
    assert [row[0] for row in rows] == ["| [8, 3]", "| [8, 1]", "| [8, 0]"]
    assert [row[2] for row in rows] == ["327.5", "167.5", "87.5"]  # chunk + sherpa's 7.5 ms window reach
    assert all(len(row) == 9 for row in rows)
    assert lines[6].startswith("3 utterances; emission delays against the RNN-T Viterbi (float64)")
    assert lines[7].startswith("Memory over a 30 s stream at [8, 3]")
