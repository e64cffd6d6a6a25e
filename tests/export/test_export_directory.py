"""An export directory is whole and of one model (`asr_plugin.export.export_dir`): an export replacing another leaves
nothing of the old set (no stale int8 files), a failure or a kill half-way leaves the old set as it was, the
record names the model's and every file's hash, and files no export wrote are refused, never deleted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from built_once import built_once, copy_of
from onnx_fixtures import LetterPieces
from tiny_models import tiny_transducer

from asr_plugin.export import export_onnx, export_transducer
from asr_plugin.export.export_dir import RECORD_NAME, export_directory, file_sha256, model_sha256, read_record

NEMO = {"kind": "nemo", "options": {"num_mel_bins": 16}}
OLD_SOURCE = "/runs/old.ckpt"


@pytest.fixture(scope="module")
def old_export(tmp_path_factory) -> Path:
    """The export (float and int8, of `OLD_SOURCE`) of `tiny_transducer(seed=1)` that the tests replace, made once
    per test run (an ONNX export is seconds of CPU): tests take a copy (`_old_export_in`)."""
    built = built_once(
        tmp_path_factory,
        "export_of_tiny_transducer_1",
        lambda directory: export_onnx(
            tiny_transducer(seed=1), NEMO, LetterPieces(7), directory / "sherpa", int8=True, source=OLD_SOURCE
        ),
    )
    return built / "sherpa"


def _old_export_in(tmp_path: Path, old_export: Path) -> tuple[Path, torch.nn.Module]:
    """A private copy of `old_export` at tmp_path/sherpa, with `tiny_transducer(seed=1)`, the model it is of."""
    return copy_of(old_export, tmp_path / "sherpa"), tiny_transducer(seed=1)


def _files(directory: Path) -> dict[str, str]:
    return {path.name: file_sha256(path) for path in sorted(directory.iterdir())}


def _check_record(directory: Path, model: torch.nn.Module) -> None:
    record = read_record(directory)
    files = _files(directory)
    assert record["model_sha256"] == model_sha256(model)
    assert record["files"] == {name: digest for name, digest in files.items() if name != RECORD_NAME}


def test_an_overwrite_without_int8_leaves_no_int8_file_of_the_old_model(tmp_path, old_export):
    (out, old), new = _old_export_in(tmp_path, old_export), tiny_transducer(seed=2)
    assert read_record(out)["source"] == OLD_SOURCE
    assert {name for name in _files(out)} >= {"encoder.int8.onnx", "decoder.int8.onnx", "joiner.int8.onnx"}
    _check_record(out, old)
    with pytest.raises(FileExistsError, match="overwrite"):
        export_onnx(new, NEMO, LetterPieces(7), out)
    paths = export_onnx(new, NEMO, LetterPieces(7), out, overwrite=True, source="/runs/new.ckpt")
    assert sorted(_files(out)) == sorted([*(path.name for path in paths.values()), RECORD_NAME])
    assert not list(out.glob("*.int8.onnx"))
    _check_record(out, new)
    assert read_record(out)["source"] == "/runs/new.ckpt" and model_sha256(old) != model_sha256(new)
    assert not list(tmp_path.glob(".sherpa.*"))  # no staging or replaced directory left


def test_a_failure_half_way_through_an_overwrite_leaves_the_old_export_whole(tmp_path, monkeypatch, old_export):
    from asr_plugin.export import onnx_export

    (out, old), new = _old_export_in(tmp_path, old_export), tiny_transducer(seed=2)
    before = _files(out)
    written = []

    def write_then_fail(path, *args, **kwargs):
        if written:  # the new encoder is written; the decoder is not
            raise KeyboardInterrupt
        written.append(path)
        return real_write(path, *args, **kwargs)

    real_write = onnx_export.write_onnx
    monkeypatch.setattr(onnx_export, "write_onnx", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        export_onnx(new, NEMO, LetterPieces(7), out, overwrite=True)
    assert written and _files(out) == before
    _check_record(out, old)
    assert not list(tmp_path.glob(".sherpa.*"))


KILLED_EXPORT = """
import sys, time
from onnx_fixtures import LetterPieces
from tiny_models import tiny_transducer
from asr_plugin.export import onnx_export
real = onnx_export.write_quantized
def slow(*args, **kwargs):
    real(*args, **kwargs)
    print("quantized", flush=True)
    time.sleep(600)
onnx_export.write_quantized = slow
onnx_export.export_onnx(tiny_transducer(seed=2), {"kind": "nemo", "options": {"num_mel_bins": 16}}, LetterPieces(7),
                        sys.argv[1], int8=True, overwrite=True)
"""


def test_a_kill_during_an_overwrite_leaves_the_old_export_and_the_next_export_cleans_up(tmp_path, old_export):
    out, _ = _old_export_in(tmp_path, old_export)
    before = _files(out)
    tests = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests / "export"), *sys.path])}
    run = subprocess.Popen([sys.executable, "-c", KILLED_EXPORT, str(out)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "quantized\n"  # the new encoder and its int8 file are written
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert _files(out) == before  # the old set, whole: not the new encoder beside the old decoder
    (leftover,) = tmp_path.glob(".sherpa.*.staging")
    assert (leftover / "encoder.onnx").exists()
    old_time = time.time() - 3600
    os.utime(leftover, (old_time, old_time))
    new = tiny_transducer(seed=3)
    export_onnx(new, NEMO, LetterPieces(7), out, overwrite=True)
    _check_record(out, new)
    assert not leftover.exists()


def test_files_no_export_wrote_are_refused_by_name_and_kept(tmp_path, old_export):
    model = tiny_transducer(seed=1)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=r"holds \['notes.txt'\], which no export wrote"):
            export_onnx(model, NEMO, LetterPieces(7), out, overwrite=overwrite)
    assert (out / "notes.txt").read_text() == "my notes" and sorted(_files(out)) == ["notes.txt"]
    _old_export_in(tmp_path, old_export)
    (tmp_path / "sherpa" / "README").write_text("added later")
    with pytest.raises(ValueError, match=r"\['README'\]"):
        export_onnx(model, NEMO, LetterPieces(7), tmp_path / "sherpa", overwrite=True)


def test_an_export_made_before_records_is_replaced_whole(tmp_path, old_export):
    out, _ = _old_export_in(tmp_path, old_export)
    assert list(out.glob("*.int8.onnx"))
    (out / RECORD_NAME).unlink()  # as an older version wrote it
    new = tiny_transducer(seed=2)
    export_onnx(new, NEMO, LetterPieces(7), out, overwrite=True)
    assert not list(out.glob("*.int8.onnx"))
    _check_record(out, new)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_torch_export_directory_follows_the_same_rule(tmp_path):
    old, new = tiny_transducer(seed=1), tiny_transducer(seed=2)
    out = tmp_path / "export"
    export_transducer(old, out, feature_dim=16, source="/runs/old.ckpt")
    (out / "stale.pt2").write_bytes((out / "joint.pt2").read_bytes())  # a file the record does not list
    with pytest.raises(ValueError, match="stale.pt2"):
        export_transducer(new, out, feature_dim=16, overwrite=True)
    (out / "stale.pt2").unlink()
    export_transducer(new, out, feature_dim=16, overwrite=True)
    _check_record(out, new)
    assert sorted(json.loads((out / RECORD_NAME).read_text())["files"]) == [
        "encoder.pt2",
        "joint.pt2",
        "predictor.pt2",
        "transducer.json",
    ]


def test_the_directory_swap_is_a_piece_of_its_own(tmp_path):
    """What a streaming export (one directory per lookahead) reuses: any files, written into the staging directory."""
    out = tmp_path / "lookahead_2"
    with export_directory(out, "digest-1", source="a.ckpt") as staging:
        (staging / "a.bin").write_bytes(b"one")
        (staging / "b.bin").write_bytes(b"two")
        assert not out.exists()
    with export_directory(out, "digest-2", overwrite=True) as staging:
        (staging / "a.bin").write_bytes(b"three")
    assert sorted(_files(out)) == ["a.bin", RECORD_NAME]
    assert read_record(out) == {
        "model_sha256": "digest-2",
        "source": None,
        "files": {"a.bin": file_sha256(out / "a.bin")},
    }


def test_two_exports_into_one_new_directory_keep_the_first_to_finish(tmp_path):
    """Both start while the target is absent; the later swap fails naming the export it found, which stays."""
    out = tmp_path / "sherpa"
    with pytest.raises(FileExistsError, match=rf"{out}: another export \(of b\.ckpt, model sha256 digest-b\)"):
        with export_directory(out, "digest-a", source="a.ckpt") as first:
            (first / "a.bin").write_bytes(b"first")
            with export_directory(out, "digest-b", source="b.ckpt") as second:
                (second / "b.bin").write_bytes(b"second")
    assert sorted(_files(out)) == ["b.bin", RECORD_NAME] and read_record(out)["model_sha256"] == "digest-b"
    assert not list(tmp_path.glob(".sherpa.*.staging"))


def test_a_slow_exports_staging_directory_is_not_taken_for_a_killed_ones(tmp_path):
    out = tmp_path / "sherpa"
    killed = tmp_path / ".sherpa.0badc0de.staging"  # a killed export's: nobody holds its lock
    killed.mkdir()
    with export_directory(out, "digest-slow", overwrite=True) as slow:
        (slow / "encoder.onnx").write_bytes(b"minutes of writing")
        hour_ago = time.time() - 3600
        for staging in (slow, killed):
            os.utime(staging, (hour_ago, hour_ago))
        with export_directory(out, "digest-other", overwrite=True) as other:
            (other / "a.bin").write_bytes(b"other")
        assert slow.is_dir() and not killed.exists()
    assert read_record(out)["model_sha256"] == "digest-slow"  # --overwrite: the last to finish replaces


def test_a_link_to_an_export_is_replaced_through(tmp_path):
    """exp/latest -> exp/v3: the export replaces v3 (beside which it is staged) and the link still names it."""
    real = tmp_path / "v3"
    with export_directory(real, "digest-old") as staging:
        (staging / "a.bin").write_bytes(b"old")
    link = tmp_path / "latest"
    link.symlink_to(real, target_is_directory=True)
    with export_directory(link, "digest-new", overwrite=True) as staging:
        assert staging.parent == tmp_path
        (staging / "a.bin").write_bytes(b"new")
    assert link.is_symlink() and link.resolve() == real
    assert read_record(real)["model_sha256"] == "digest-new" and (real / "a.bin").read_bytes() == b"new"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["latest", "v3"]


def _lookahead_set(out: Path, digest: str, fail_after: int | None = None, overwrite: bool = False) -> None:
    """A set of two member exports (as `export_onnx_every_lookahead` writes one per lookahead), of model `digest`;
    `fail_after`: the writer dies after that many members."""
    with export_directory(out, digest, overwrite=overwrite) as staging:
        for index, name in enumerate(("32_3", "32_0")):
            if index == fail_after:
                raise KeyboardInterrupt
            with export_directory(staging / name, digest) as member:
                (member / "encoder.onnx").write_bytes(f"{digest} {name}".encode())


def test_a_set_of_lookahead_exports_is_swapped_as_one_with_its_record_at_the_top(tmp_path):
    out = tmp_path / "online"
    _lookahead_set(out, "digest-a")
    assert read_record(out)["model_sha256"] == "digest-a"
    assert set(read_record(out)["files"]) == {"32_3", "32_0"}
    with pytest.raises(KeyboardInterrupt):
        _lookahead_set(out, "digest-b", fail_after=1, overwrite=True)  # killed after the first lookahead
    assert [read_record(out / name)["model_sha256"] for name in ("32_3", "32_0")] == ["digest-a", "digest-a"]
    _lookahead_set(out, "digest-b", overwrite=True)
    assert [read_record(out / name)["model_sha256"] for name in ("32_3", "32_0", ".")] == ["digest-b"] * 3
    assert sorted(path.name for path in tmp_path.iterdir()) == ["online"]
