"""scripts/prepare_data.py as a user runs it (its main() in this process: the assertions are about what it
makes and says, not about a process), including the exact command a data module prints for what is missing,
and scripts/benchmark_data.py's tables."""

from __future__ import annotations

import shlex
from pathlib import Path

import benchmark_data
import prepare_data
import pytest
from data_helpers import tree_listing, write_small_librispeech

from asr_plugin.data import TransducerDataModule, read_manifest
from asr_plugin.frontend.logmel import FeatureStats
from asr_plugin.text import Tokenizer

REPO = Path(__file__).resolve().parents[2]
SPLITS = ["data.train_splits=[train-clean-100]", "data.valid_splits=[dev-clean]", "data.test_splits=[dev-clean]"]


@pytest.fixture(autouse=True)
def project_root(monkeypatch):
    """What prepare_data.py's main sets when it is unset (paths.root_dir), undone after each test."""
    monkeypatch.setenv("PROJECT_ROOT", str(REPO))


def _output(capsys) -> str:
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_prepare_data_steps_strict_and_reuse(tmp_path, capsys):
    data_dir = tmp_path / "data"
    root = write_small_librispeech(data_dir / "LibriSpeech")
    (root / "train-clean-100" / "19" / "2" / "19-2-0005.flac").write_bytes(b"junk")
    work = tmp_path / "work"
    config = ["data=librispeech", f"paths.data_dir={data_dir}", f"data.work_dir={work}", *SPLITS, "data.vocab_size=30"]
    config.append("data.frontend=null")  # a front end with global statistics: the stats step has work
    with pytest.raises(ValueError, match=r"strict mode.*\n.*19-2-0005\.flac"):
        prepare_data.main(["--steps", "manifests", "--strict", "--num-workers", "1", *config])
    before = tree_listing(root)
    prepare_data.main(["--num-workers", "2", *config])
    assert tree_listing(root) == before  # the corpus is only read
    assert "19-2-0005.flac" in _output(capsys) and len(read_manifest(work / "train-clean-100.jsonl")) == 11
    assert Tokenizer(work / "tokenizer_bpe30.model").vocab_size == 30
    assert FeatureStats.load(work / "feature_stats.json").mean.shape == (80,)
    prepare_data.main(["--steps", "tokenizer,stats", *config])
    assert _output(capsys).count("reusing") == 2
    with pytest.raises(ValueError, match=r"unknown preparation step\(s\) \['tokens'\]"):
        prepare_data.main(["--steps", "tokens", *config])


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
    program, script, *args = shlex.split(command)
    assert (program, script) == ("python", "scripts/prepare_data.py")
    prepare_data.main(args)
    assert dm.missing_prepared() == []
    dm.setup("fit")
    assert dm.vocab_size == 30 and len(dm.train_dataloader().dataset) == 12


def test_benchmark_data_prints_both_tables(tmp_path, capsys):
    benchmark_data.main(["check", "--entries", "300", "--repeats", "1", "--tmp-dir", str(tmp_path)])
    check = _output(capsys)
    assert "| audio_problems, 16 thread(s) |" in check and "| read_manifest |" in check
    loader_args = ["--utterances", "3", "--min-seconds", "2", "--max-seconds", "3", "--vocab-size", "40"]
    benchmark_data.main(["loader", *loader_args, "--repeats", "1", "--tmp-dir", str(tmp_path)])
    rows = [line for line in _output(capsys).splitlines() if line.startswith(("| logmel", "| nemo"))]
    assert len(rows) == 4 and all(float(row.split("|")[3]) > 0 for row in rows)
    assert list(tmp_path.iterdir()) == []  # its temporary files are gone
