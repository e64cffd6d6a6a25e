"""Evaluation, transcription and export take the tokenizer, the features and the feature size from the
checkpoint's own records, never from a run directory or a guess; long audio is decoded in chunks."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from eval_setup import eval_cfg
from test_evaluation_recipe import CONF_DIR, save_module_checkpoint
from test_long_audio import write_speech_like

from asr_plugin.data import read_manifest
from asr_plugin.evaluation import evaluate
from asr_plugin.evaluation.chunking import chunk_bounds
from asr_plugin.evaluation.transcriber import Transcriber
from asr_plugin.formats.checkpoint import load_model

REPO_ROOT = CONF_DIR.parent


def test_evaluation_uses_the_checkpoints_tokenizer_whatever_the_data_config_says(corpus, tmp_path):
    root, datamodule = corpus
    checkpoint = tmp_path / "model.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1)
    reference = evaluate(eval_cfg(root, checkpoint))["rows"]
    # another tokenizer size and another number of mel bins in the data config: before, a size error
    other = evaluate(eval_cfg(root, checkpoint, "data.vocab_size=40", "data.num_mel_bins=64"))["rows"]
    assert [(r["set"], r["wer"], r["errors"]) for r in other] == [(r["set"], r["wer"], r["errors"]) for r in reference]


def test_a_checkpoint_without_records_is_evaluated_with_the_data_config_and_refused_by_transcribe(
    corpus, tmp_path, caplog
):
    root, datamodule = corpus
    checkpoint = tmp_path / "old.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1, records=False)
    with caplog.at_level(logging.WARNING):
        assert evaluate(eval_cfg(root, checkpoint))["rows"]
    assert any("records no tokenizer and front end" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match=r"old\.ckpt: no tokenizer and front-end record"):
        Transcriber([checkpoint])


def test_checkpoints_of_different_tokenizers_are_not_averaged(corpus, tmp_path):
    root, datamodule = corpus
    save_module_checkpoint(tmp_path / "epoch=0-step=1.ckpt", datamodule, seed=0, epoch=0, step=1)
    other = torch.load(tmp_path / "epoch=0-step=1.ckpt", weights_only=True)
    other["asr_plugin"]["tokenizer"] = {**other["asr_plugin"]["tokenizer"], "sha256": "0" * 64}
    torch.save(other, tmp_path / "epoch=1-step=2.ckpt")
    with pytest.raises(ValueError, match="record another tokenizer"):
        load_model([tmp_path / "epoch=0-step=1.ckpt", tmp_path / "epoch=1-step=2.ckpt"])


def test_chunks_cover_the_audio_and_are_cut_in_its_quiet_part():
    rate = 1000
    generator = torch.Generator().manual_seed(0)
    audio = torch.randn(10_500, generator=generator)
    audio[3_700:3_760] = 0.0  # the one pause within 2 s of the first chunk's end (chunk of 4 s)
    bounds = chunk_bounds(audio, rate, chunk_seconds=4.0, search_seconds=2.0)
    assert bounds[0] == (0, 3_700) and bounds[-1][1] == 10_500
    assert all(end - start <= 4_000 for start, end in bounds)
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert chunk_bounds(audio[:4_000], rate, 4.0) == [(0, 4_000)]
    with pytest.raises(ValueError, match="chunk_seconds"):
        chunk_bounds(audio, rate, 0.0)


def test_long_audio_is_decoded_in_chunks_with_a_progress_bar(corpus, tmp_path, capsys):
    root, datamodule = corpus
    checkpoint = tmp_path / "model.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1)
    entries = read_manifest(datamodule.split_manifest("test-piper"))[:2]
    first, second = (torch.from_numpy(sf.read(e.path, dtype="float32")[0]) for e in entries)
    silence = torch.zeros(16_000)
    path = tmp_path / "long.wav"
    sf.write(path, torch.cat([first, silence, second]).numpy(), 16_000)
    chunk = (first.shape[0] + 8_000) / 16_000  # ends half-way through the silence
    transcriber = Transcriber([checkpoint], method="greedy", chunk_seconds=chunk)
    text = transcriber.transcribe_file(path)
    cut = first.shape[0] + 8_000 - 32_000  # the search window: the chunk's last 2 s
    assert "long.wav" in capsys.readouterr().err  # the progress bar
    bounds = chunk_bounds(torch.cat([first, silence, second]), 16_000, chunk)
    assert len(bounds) >= 2 and first.shape[0] <= bounds[0][1] < first.shape[0] + 16_000 and bounds[0][1] > cut
    pieces = transcriber.decode_pieces([torch.cat([first, silence, second])[s:e] for s, e in bounds])
    assert text == " ".join(p for p in pieces if p)


@pytest.mark.slow
def test_transcribe_script_decodes_ten_minutes_in_chunks(corpus, tmp_path):
    root, datamodule = corpus
    checkpoint = tmp_path / "model.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1)
    generator = torch.Generator().manual_seed(0)
    path = tmp_path / "ten-minutes.flac"
    sf.write(path, (0.1 * torch.randn(600 * 16_000, generator=generator)).numpy(), 16_000)
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "transcribe.py"),
            str(path),
            "--checkpoint",
            str(checkpoint),
            "--method",
            "greedy",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # the progress (whole lines in a log, `asr_plugin.progress`): begun at 0 s, ended at all 600 s decoded
    progress = re.findall(r"ten-minutes\.flac \(600 s\): (\d+)/600 s \(\d+ %\)", done.stderr)
    assert progress[0] == "0" and progress[-1] == "600", done.stderr[-2000:]
    assert done.stdout.startswith(f"{path}\t")


def _peak_traced_bytes(transcriber: Transcriber, path: Path) -> int:
    """Peak of the memory Python and numpy allocate (tracemalloc) while `transcriber` transcribes `path`."""
    tracemalloc.start()
    try:
        transcriber.transcribe_file(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_file_is_transcribed_in_memory_that_does_not_grow_with_its_length(corpus, tmp_path):
    root, datamodule = corpus
    checkpoint = tmp_path / "model.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1)
    transcriber = Transcriber([checkpoint], method="greedy", chunk_seconds=10.0)
    short = write_speech_like(tmp_path / "short.wav", 20.0)  # 48 kHz stereo
    long = write_speech_like(tmp_path / "long.wav", 120.0)  # 46 MB of float32 if decoded whole
    peak_short, peak_long = _peak_traced_bytes(transcriber, short), _peak_traced_bytes(transcriber, long)
    assert peak_long < 1.25 * peak_short + 2**20, (peak_short, peak_long)


def test_audio_with_nan_samples_is_refused_naming_the_file_and_the_script_goes_on(corpus, tmp_path):
    root, datamodule = corpus
    checkpoint = tmp_path / "model.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1)
    broken = tmp_path / "broken.wav"
    samples = np.full(16_000 * 2, 0.1, dtype=np.float32)
    samples[16_000:] = np.nan
    sf.write(str(broken), samples, 16_000, subtype="FLOAT")
    with pytest.raises(ValueError, match=r"broken\.wav: NaN or infinite samples at 1\.000 s"):
        Transcriber([checkpoint], method="greedy").transcribe_file(broken)
    good = write_speech_like(tmp_path / "good.wav", 2.0)
    script = str(REPO_ROOT / "scripts" / "transcribe.py")
    done = subprocess.run(
        [sys.executable, script, str(broken), str(good), "--checkpoint", str(checkpoint), "--method", "greedy"],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1 and f"error: {broken}: NaN or infinite samples" in done.stderr
    assert done.stdout.startswith(f"{good}\t") and str(broken) not in done.stdout


def _recorded_max_symbols(path: Path, max_symbols: int) -> None:
    """Makes the saved checkpoint's model emit tokens at every frame (so the cap decides the transcripts) and
    records `max_symbols` as its validation's greedy setting, as training does."""
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["state_dict"]["model.joint.output.bias"][0] -= 6.0  # blank almost never wins
    checkpoint["hyper_parameters"]["max_symbols_per_frame"] = max_symbols
    torch.save(checkpoint, path)


def _greedy_hypotheses(root: Path, checkpoint: Path, run: str, *overrides: str) -> list[str]:
    result = evaluate(eval_cfg(root, checkpoint, f"output_dir={root}/{run}", *overrides))
    name = result["rows"][0]["set"]
    lines = (Path(result["output_dir"]) / f"recogs-{name}-greedy.txt").read_text().splitlines()[1:]
    return [line.split("\t")[2] for line in lines]


def test_evaluation_and_transcription_decode_with_the_checkpoints_own_max_symbols(corpus, tmp_path, caplog):
    root, datamodule = corpus
    checkpoint = tmp_path / "model.ckpt"
    save_module_checkpoint(checkpoint, datamodule, seed=0, epoch=0, step=1)
    _recorded_max_symbols(checkpoint, 1)
    own = _greedy_hypotheses(root, checkpoint, "own")  # decoding.max_symbols_per_frame: null
    assert own == _greedy_hypotheses(root, checkpoint, "one", "decoding.max_symbols_per_frame=1")
    with caplog.at_level(logging.WARNING):
        overridden = _greedy_hypotheses(root, checkpoint, "three", "decoding.max_symbols_per_frame=3")
    assert overridden != own  # the cap matters for this model, so the default above is the checkpoint's
    assert any(
        "decoding.max_symbols_per_frame=3 overrides the checkpoint's 1" in r.getMessage() for r in caplog.records
    )
    audio = read_manifest(datamodule.split_manifest("test-espeak"))[0].path
    default = Transcriber([checkpoint], method="greedy")
    assert default.options["max_symbols_per_frame"] == 1
    assert default.transcribe([audio]) == Transcriber(
        [checkpoint], method="greedy", max_symbols_per_frame=1
    ).transcribe([audio])
