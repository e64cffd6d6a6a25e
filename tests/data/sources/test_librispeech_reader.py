"""LibriSpeech reader and manifest preparation on hand-made trees with broken inputs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from data_helpers import write_chapter, write_flac

from asr_plugin.data import CorpusLayout, prepare_split, read_manifest, scan_split


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def broken_tree(tmp_path) -> Path:
    """dev-clean with 3 good utterances and one of each problem."""
    root = tmp_path / "LibriSpeech"
    split = root / "dev-clean"
    chapter = write_chapter(split, 84, 121123, {0: "HELLO WORLD", 1: "it's a test", 2: "GOOD DAY"})
    (chapter / "84-121123-0003.flac").write_bytes(b"not a flac file at all")  # unreadable
    # libsndfile cannot write a zero-frame FLAC; a zero-frame WAV body is read the same way.
    sf.write(str(chapter / "84-121123-0004.flac"), np.zeros((0, 1), "float32"), 16000, format="WAV")  # empty
    write_flac(chapter / "84-121123-0005.flac", 1.0, sample_rate=8000)  # another rate: resampled when loaded
    write_flac(chapter / "84-121123-0006.flac", 1.0)  # no transcript line
    with (chapter / "84-121123.trans.txt").open("a") as handle:
        handle.write(
            "84-121123-0003 BROKEN\n84-121123-0004 EMPTY\n84-121123-0005 NARROW\n"
            "84-121123-0009 NO AUDIO FOR THIS LINE\n84-121123-0007   \n"
        )
    write_flac(chapter / "84-121123-0007.flac", 1.0)  # empty transcript text
    write_chapter(split, 174, 50561, {0: "LOST TRANSCRIPT"}, transcript=False)
    return root


def test_scan_reports_transcript_problems(broken_tree):
    candidates, skipped = scan_split(broken_tree, "dev-clean")
    # Audio problems are found later (prepare_split); the scan only pairs files with transcript lines.
    assert [c.id for c in candidates] == [f"84-121123-{n:04d}" for n in range(6)]
    assert candidates[1].text == "it's a test"  # as written: the tokenizer normalises it
    reasons = {Path(s.path).name: s.reason for s in skipped}
    assert reasons == {
        "84-121123-0006.flac": "no line for 84-121123-0006 in 84-121123.trans.txt",
        "84-121123-0007.flac": "empty transcript line for 84-121123-0007 in 84-121123.trans.txt",
        "84-121123.trans.txt": "transcript line 84-121123-0009 has no audio file",
        "174-50561-0000.flac": "no transcript file 174-50561.trans.txt",
    }


def test_prepare_skips_and_lists_bad_files(broken_tree, tmp_path, capsys):
    before = _tree_digest(broken_tree)
    out = prepare_split(CorpusLayout(broken_tree, tmp_path / "manifests"), "dev-clean", num_workers=1, progress=False)
    entries = read_manifest(out)
    assert [e.id for e in entries] == ["84-121123-0000", "84-121123-0001", "84-121123-0002", "84-121123-0005"]
    assert entries[0].duration == pytest.approx(1.0, abs=1e-3)
    assert entries[2].duration == pytest.approx(1.2, abs=1e-3)
    assert entries[3].duration == pytest.approx(1.0, abs=1e-3) and entries[3].speaker == "84"
    assert Path(entries[0].path).is_absolute() and entries[0].text == "HELLO WORLD"
    skip_text = CorpusLayout(broken_tree, tmp_path / "manifests").skip_list("dev-clean").read_text()
    for name, reason in [
        ("0003.flac", "unreadable audio"),
        ("0004.flac", "empty audio"),
        ("0006.flac", "no line for"),
        ("174-50561-0000.flac", "no transcript file"),
    ]:
        line = next(line for line in skip_text.splitlines() if name in line)
        assert reason in line
    printed = capsys.readouterr().out
    assert "0003.flac" in printed and "left out" in printed
    assert _tree_digest(broken_tree) == before  # the source is only read


def test_strict_raises_naming_each_file(broken_tree, tmp_path):
    with pytest.raises(ValueError) as err:
        prepare_split(CorpusLayout(broken_tree, tmp_path / "m"), "dev-clean", strict=True, progress=False)
    for name in ("0003.flac", "0004.flac", "0006.flac", "174-50561-0000.flac"):
        assert name in str(err.value)
    assert not (tmp_path / "m" / "dev-clean.jsonl").exists()


def test_existing_manifest_is_kept_unless_overwrite(broken_tree, tmp_path, capsys):
    manifest_dir = tmp_path / "m"
    manifest_dir.mkdir()
    user_file = manifest_dir / "dev-clean.jsonl"
    user_file.write_text('{"id": "x", "path": "/x.flac", "duration": 1.0, "text": "X"}\n')
    prepare_split(CorpusLayout(broken_tree, manifest_dir), "dev-clean", progress=False)
    assert [e.id for e in read_manifest(user_file)] == ["x"]
    assert "reusing" in capsys.readouterr().out
    prepare_split(CorpusLayout(broken_tree, manifest_dir), "dev-clean", overwrite=True, progress=False)
    assert len(read_manifest(user_file)) == 4


def test_parallel_matches_serial_over_several_splits(tmp_path):
    root = tmp_path / "LS"
    for split, speaker in (("train-clean-100", 19), ("test-clean", 1089)):
        for chapter in (1, 2):
            write_chapter(root / split, speaker, chapter, {n: f"WORD {n}" for n in range(5)}, seconds=0.5)
    for split in ("train-clean-100", "test-clean"):
        serial = prepare_split(CorpusLayout(root, tmp_path / "a"), split, progress=False)
        parallel = prepare_split(CorpusLayout(root, tmp_path / "b"), split, num_workers=2, progress=False)
        assert read_manifest(serial) == read_manifest(parallel)
        assert len(read_manifest(serial)) == 10
    assert not CorpusLayout(root, tmp_path / "a").skip_list("test-clean").exists()


def test_missing_split_directory_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="dev-other"):
        prepare_split(CorpusLayout(tmp_path / "corpus", tmp_path / "m"), "dev-other", progress=False)


def test_full_check_finds_truncated_audio(tmp_path):
    root = tmp_path / "LS"
    chapter = write_chapter(root / "dev-clean", 1, 2, {0: "A", 1: "B"}, seconds=2.0)
    flac = chapter / "1-2-0001.flac"
    flac.write_bytes(flac.read_bytes()[: len(flac.read_bytes()) // 3])
    quick = read_manifest(prepare_split(CorpusLayout(root, tmp_path / "quick"), "dev-clean", progress=False))
    full = read_manifest(
        prepare_split(CorpusLayout(root, tmp_path / "full"), "dev-clean", full_check=True, progress=False)
    )
    assert len(full) == 1 and len(quick) >= len(full)
