"""scripts/prepare_data.py run as a user would (one subprocess each: they import torch), including the exact
command a data module prints for what is missing."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from data_helpers import tree_listing, write_small_librispeech

from asr_plugin.data import TransducerDataModule, read_manifest
from asr_plugin.frontend.logmel import FeatureStats
from asr_plugin.text import Tokenizer

REPO = Path(__file__).resolve().parents[2]
SPLITS = ["data.train_splits=[train-clean-100]", "data.valid_splits=[dev-clean]", "data.test_splits=[dev-clean]"]


def _run(*args, cwd=REPO):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run(
        [sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_prepare_data_steps_strict_and_reuse(tmp_path):
    data_dir = tmp_path / "data"
    root = write_small_librispeech(data_dir / "LibriSpeech")
    (root / "train-clean-100" / "19" / "2" / "19-2-0005.flac").write_bytes(b"junk")
    work = tmp_path / "work"
    config = ["data=librispeech", f"paths.data_dir={data_dir}", f"data.work_dir={work}", *SPLITS, "data.vocab_size=30"]
    config.append("data.frontend=null")  # a front end with global statistics: the stats step has work
    script = REPO / "scripts" / "prepare_data.py"
    strict = _run(script, "--steps", "manifests", "--strict", "--num-workers", "1", *config)
    assert strict.returncode != 0 and "19-2-0005.flac" in strict.stderr
    before = tree_listing(root)
    done = _run(script, "--num-workers", "2", *config)
    assert done.returncode == 0, done.stderr
    assert tree_listing(root) == before  # the corpus is only read
    assert "19-2-0005.flac" in done.stdout and len(read_manifest(work / "train-clean-100.jsonl")) == 11
    assert Tokenizer(work / "tokenizer_bpe30.model").vocab_size == 30
    assert FeatureStats.load(work / "feature_stats.json").mean.shape == (80,)
    again = _run(script, "--steps", "tokenizer,stats", *config)
    assert again.returncode == 0 and again.stdout.count("reusing") == 2
    bad = _run(script, "--steps", "tokens", *config)
    assert bad.returncode != 0 and "unknown preparation step(s) ['tokens']" in bad.stderr


@pytest.mark.slow
def test_the_command_a_data_module_prints_makes_what_it_misses(tmp_path):
    root = write_small_librispeech(tmp_path / "LibriSpeech")
    dm = TransducerDataModule(
        root=str(root),
        work_dir=str(tmp_path / "work"),
        train_splits=["train-clean-100"],
        valid_splits=["dev-clean"],
        test_splits=["dev-clean"],
        vocab_size=30,
        num_workers=0,
    )
    with pytest.raises(FileNotFoundError) as error:
        dm.setup("fit")
    command = next(line.strip() for line in str(error.value).splitlines() if "prepare_data.py" in line)
    done = _run(*shlex.split(command)[1:])  # "python" -> this interpreter
    assert done.returncode == 0, done.stderr
    assert dm.missing_prepared() == []
    dm.setup("fit")
    assert dm.vocab_size == 30 and len(dm.train_dataloader().dataset) == 12


@pytest.mark.slow
def test_benchmark_data_prints_both_tables(tmp_path):
    check = _run(
        REPO / "scripts" / "benchmark_data.py", "check", "--entries", "300", "--repeats", "1", "--tmp-dir", tmp_path
    )
    assert check.returncode == 0, check.stderr
    assert "| audio_problems, 16 thread(s) |" in check.stdout and "| read_manifest |" in check.stdout
    loader = _run(
        REPO / "scripts" / "benchmark_data.py",
        "loader",
        "--utterances",
        "3",
        "--min-seconds",
        "2",
        "--max-seconds",
        "3",
        "--vocab-size",
        "40",
        "--repeats",
        "1",
        "--tmp-dir",
        tmp_path,
    )
    assert loader.returncode == 0, loader.stderr
    rows = [line for line in loader.stdout.splitlines() if line.startswith(("| logmel", "| nemo"))]
    assert len(rows) == 4 and all(float(row.split("|")[3]) > 0 for row in rows)
    assert list(tmp_path.iterdir()) == []  # its temporary files are gone
