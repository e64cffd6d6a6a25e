"""The command-line scripts, run as a user would (one subprocess each: they import torch)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from data_helpers import write_chapter

from asr_plugin.data import FeatureStats, Tokenizer, read_manifest

REPO = Path(__file__).resolve().parents[2]


def _run(script, *args):
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run([sys.executable, str(REPO / "scripts" / script), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_prepare_tokenizer_stats_pipeline(tmp_path):
    root = tmp_path / "LibriSpeech"
    write_chapter(root / "dev-clean", 1, 2, {n: f"THE CAT NUMBER {n} SEES A DOG" for n in range(6)}, seconds=0.5)
    (root / "dev-clean" / "1" / "2" / "1-2-0005.flac").write_bytes(b"junk")
    m = tmp_path / "manifests"
    strict = _run("prepare_librispeech.py", "--root", root, "--manifest-dir", m, "--splits", "dev-clean",
                  "--strict", "--num-workers", "1")
    assert strict.returncode != 0 and "1-2-0005.flac" in strict.stderr
    done = _run("prepare_librispeech.py", "--root", root, "--manifest-dir", m, "--splits", "dev-clean",
                "--num-workers", "2")
    assert done.returncode == 0, done.stderr
    assert "1-2-0005.flac" in done.stdout and len(read_manifest(m / "dev-clean.jsonl")) == 5
    tok = _run("train_tokenizer.py", "--manifests", m / "dev-clean.jsonl", "--output", m / "t.model",
               "--vocab-size", "30")
    assert tok.returncode == 0, tok.stderr
    assert Tokenizer(m / "t.model").vocab_size == 30
    stats = _run("compute_feature_stats.py", "--manifests", m / "dev-clean.jsonl", "--output", m / "s.json",
                 "--num-workers", "0")
    assert stats.returncode == 0, stats.stderr
    assert FeatureStats.load(m / "s.json").mean.shape == (80,)
    again = _run("compute_feature_stats.py", "--manifests", m / "dev-clean.jsonl", "--output", m / "s.json")
    assert again.returncode != 0 and "--overwrite" in again.stderr
