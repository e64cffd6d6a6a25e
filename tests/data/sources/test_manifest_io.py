"""Manifest JSON-lines round trip and error reporting."""

from __future__ import annotations

import json

import pytest

from asr_plugin.data import ManifestEntry, audio_problems, read_manifest, write_manifest


def test_round_trip(tmp_path):
    entries = [
        ManifestEntry("1-2-0000", "/a/1-2-0000.flac", 1.25, "HELLO"),
        ManifestEntry("1-2-0001", "/a/1-2-0001.flac", 3.5, "IT'S ÜBER"),
    ]
    path = write_manifest(entries, tmp_path / "m" / "x.jsonl")
    assert read_manifest(path) == entries
    first = json.loads(path.read_text().splitlines()[0])
    assert first == {"id": "1-2-0000", "path": "/a/1-2-0000.flac", "duration": 1.25, "text": "HELLO"}


def test_never_overwrites_without_flag(tmp_path):
    path = tmp_path / "x.jsonl"
    write_manifest([ManifestEntry("a", "/a", 1.0, "A")], path)
    with pytest.raises(FileExistsError, match="overwrite"):
        write_manifest([ManifestEntry("b", "/b", 1.0, "B")], path)
    write_manifest([ManifestEntry("b", "/b", 1.0, "B")], path, overwrite=True)
    assert read_manifest(path)[0].id == "b"


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not valid JSON"),
        ('{"id": "a", "path": "/a", "text": "A"}', "missing key"),
        ('{"id": "a", "path": "/a", "duration": 0, "text": "A"}', "duration must be a positive number"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "ok", "path": "/ok", "duration": 1.0, "text": "OK"}\n\n' + line + "\n")
    with pytest.raises(ValueError, match=f"bad.jsonl:3: {message}"):
        read_manifest(path)


def test_missing_manifest(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        read_manifest(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("threads", [1, 4])
def test_audio_problems_lists_missing_and_empty_files_in_order(tmp_path, threads):
    entries = []
    for n in range(40):
        path = tmp_path / f"{n}.flac"
        if n % 10 != 3:
            path.write_bytes(b"" if n % 10 == 7 else b"audio")
        entries.append(ManifestEntry(str(n), str(path), 1.0, "X"))
    problems = audio_problems(entries, num_threads=threads)
    assert [(entry.id, problem) for entry, problem in problems] == [
        (str(n), "missing" if n % 10 == 3 else "empty (0 bytes)") for n in range(40) if n % 10 in (3, 7)
    ]
    assert audio_problems([e for e in entries if int(e.id) % 10 not in (3, 7)], num_threads=threads) == []
