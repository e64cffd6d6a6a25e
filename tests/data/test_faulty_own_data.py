"""Faulty lines of one's own data that used to get past preparation (NeMo manifests and lhotse cuts alike): each is
listed at preparation as `manifest:line` with its reason, never opened when it is no regular file, and a manifest
edited after preparation is not served from the stale prepared copy. The loader names the file of anything that
still reaches it; the data module leaves out transcripts with more tokens than the encoder has frames."""

from __future__ import annotations

import gzip
import json
import logging
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from data_helpers import write_flac

from asr_plugin.audio import load_audio
from asr_plugin.data import (
    CorpusLayout,
    CorpusPlan,
    LhotseCutsSource,
    NemoManifestSource,
    TransducerDataModule,
    prepare_corpus,
    prepare_split,
    read_manifest,
)


class FifoWatch:
    """A named pipe, and a thread that notices whether anybody opened it for reading (a writer can open it without
    blocking only then); it lets such a reader go on, so that a preparation that opens it fails instead of hanging."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path, self.opened, self._done = path, False, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody reads it
                continue
            self.opened = True
            os.close(fd)  # the reader sees the end of an empty file

    def stop(self) -> bool:
        self._done.set()
        self._thread.join()
        return self.opened


def _truncated_flac(path: Path) -> Path:
    write_flac(path, 3.0)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # the header still says 3 s
    return path


def _nan_wav(path: Path) -> Path:
    samples = np.full(16000, 0.1, dtype=np.float32)
    samples[8000:8100] = np.nan
    sf.write(str(path), samples, 16000, subtype="FLOAT")
    return path


FAULTS = {  # name -> (how the audio is made, the line's changes, the reason listed)
    "named pipe": (None, {}, "a named pipe (FIFO), not an audio file (not opened)"),
    "NaN duration": ("good", {"duration": float("nan")}, "duration"),
    "NaN offset": ("good", {"offset": float("nan")}, "offset"),
    "truncated file": (_truncated_flac, {"duration": 3.0}, "truncated or corrupt"),
    "NaN samples": (_nan_wav, {}, "100 of 16000 samples are NaN or infinite"),
    "10 MB transcript": ("good", {"text": "HELLO " * 1_750_000}, "transcript of 10499999 characters for 1.000 s"),
    "control characters": ("good", {"text": "A \x00FAULTY\x07 \u202eLINE"}, "control character U+0000"),
    "a bidi override": ("good", {"text": "A FAULTY \u202eLINE"}, "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 9"),
}


def _audio(fault: str, tmp_path: Path) -> tuple[Path, FifoWatch | None]:
    make = FAULTS[fault][0]
    if make is None:
        watch = FifoWatch(tmp_path / "pipe.wav")
        return watch.path, watch
    if make == "good":
        return write_flac(tmp_path / "good.flac", 1.0), None
    return make(tmp_path / f"bad.{'flac' if make is _truncated_flac else 'wav'}"), None


def _nemo_manifest(fault: str, tmp_path: Path) -> tuple[Path, FifoWatch | None]:
    audio, watch = _audio(fault, tmp_path)
    good = write_flac(tmp_path / "fine.flac", 1.0)
    lines = [
        {"audio_filepath": str(good), "duration": 1.0, "text": "FINE"},
        {"audio_filepath": str(audio), "duration": 1.0, "offset": 0.0, "text": "A FAULTY LINE", **FAULTS[fault][1]},
    ]
    manifest = tmp_path / "train.json"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))  # NaN as JSON's NaN
    return manifest, watch


def _cut(cut_id: str, audio: Path, changes: dict) -> dict:
    """A lhotse MonoCut line for `audio` (16 kHz, 1 s as its recording says) with the fault's changes."""
    from lhotse import MonoCut, Recording, SupervisionSegment
    from lhotse.audio import AudioSource

    recording = Recording(cut_id, [AudioSource("file", [0], str(audio))], 16000, 16000, 1.0)
    text = changes.get("text", "A FAULTY LINE")
    supervision = SupervisionSegment(f"{cut_id}-s", cut_id, 0.0, 1.0, text=text)
    record = MonoCut(cut_id, 0.0, 1.0, 0, recording=recording, supervisions=[supervision]).to_dict()
    record.update({key: changes[key] for key in ("duration",) if key in changes})
    if "offset" in changes:
        record["start"] = changes["offset"]
    return record


def _cut_manifest(fault: str, tmp_path: Path) -> tuple[Path, FifoWatch | None]:
    pytest.importorskip("lhotse")
    audio, watch = _audio(fault, tmp_path)
    duration = {"duration": 3.0} if FAULTS[fault][0] is _truncated_flac else {}
    lines = [
        _cut("fine", write_flac(tmp_path / "fine.flac", 1.0), {"text": "FINE"}),
        _cut("bad", audio, FAULTS[fault][1]),
    ]
    lines[1].update(duration)
    manifest = tmp_path / "train.jsonl.gz"
    with gzip.open(manifest, "wt") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))
    return manifest, watch


SOURCES = {
    "nemo": (_nemo_manifest, lambda manifest: NemoManifestSource(train_manifests=[str(manifest)])),
    "lhotse": (_cut_manifest, lambda manifest: LhotseCutsSource(train_cuts=[str(manifest)])),
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("kind", SOURCES)
def test_a_faulty_line_is_listed_with_its_line_and_reason(kind, fault, tmp_path):
    write, source_of = SOURCES[kind]
    manifest, watch = write(fault, tmp_path)
    layout = CorpusLayout(None, tmp_path / "work")
    try:
        out = prepare_split(layout, "train", source=source_of(manifest), progress=False)
    finally:
        opened = watch is not None and watch.stop()
    assert not opened, "the named pipe was opened for reading"
    assert [Path(entry.path).name for entry in read_manifest(out)] == ["fine.flac"]
    (listed,) = layout.skip_list("train").read_text().splitlines()
    where, reason = listed.split("\t")
    assert where.split(" ")[0] == f"{manifest}:2"
    assert FAULTS[fault][2] in reason, reason


@pytest.mark.parametrize("kind", SOURCES)
def test_a_manifest_edited_after_preparation_is_not_served_from_the_prepared_copy(kind, tmp_path):
    write, source_of = SOURCES[kind]
    manifest, _ = write("10 MB transcript", tmp_path)
    raw = gzip.decompress(manifest.read_bytes()) if kind == "lhotse" else manifest.read_bytes()
    fine_only = raw.splitlines(keepends=True)[0]
    manifest.write_bytes(gzip.compress(fine_only) if kind == "lhotse" else fine_only)
    plan = CorpusPlan(CorpusLayout(None, tmp_path / "work"), source_of(manifest), tokenizer_path=None)
    prepare_corpus(plan, ["manifests"], progress=False)
    prepare_corpus(plan, ["manifests"], progress=False)  # unchanged: reused
    edited = fine_only.replace(b"FINE", b"EDITED")
    manifest.write_bytes(gzip.compress(edited) if kind == "lhotse" else edited)
    with pytest.raises(ValueError, match=r"train.jsonl was made from .*sha256 .*rebuild it"):
        prepare_corpus(plan, ["manifests"], progress=False)
    prepare_corpus(plan, ["manifests"], overwrite=True, progress=False)
    (entry,) = read_manifest(plan.layout.manifest("train"))
    assert entry.text == "EDITED"


def test_the_loader_names_the_file_of_audio_it_cannot_use(tmp_path):
    watch = FifoWatch(tmp_path / "pipe.wav")
    with pytest.raises(ValueError, match="pipe.wav: a named pipe"):
        load_audio(watch.path)
    assert not watch.stop()
    with pytest.raises(ValueError, match=r"bad.wav: 100 of 16000 samples are NaN or infinite"):
        load_audio(_nan_wav(tmp_path / "bad.wav"))
    with pytest.raises(ValueError, match=r"bad.flac: cannot decode the audio \(.+\)"):
        load_audio(_truncated_flac(tmp_path / "bad.flac"))
    with pytest.raises(ValueError, match="a character device"):
        load_audio("/dev/zero")


def test_transcripts_with_more_tokens_than_the_model_can_emit_are_left_out_and_listed(tmp_path, caplog):
    audio = {name: write_flac(tmp_path / f"{name}.flac", 1.0, seed=index) for index, name in enumerate("abcd")}
    texts = {"a": "A CAT", "b": "THE DOG", "c": " ".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), "d": "A RED TREE"}
    for split, names in (("train", "abc"), ("valid", "cd")):
        lines = [{"audio_filepath": str(audio[n]), "duration": 1.0, "text": texts[n]} for n in names]
        (tmp_path / f"{split}.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    dm = TransducerDataModule(
        work_dir=str(tmp_path / "work"),
        corpus="nemo",
        train_manifests=[str(tmp_path / "train.json")],
        valid_manifests=[str(tmp_path / "valid.json")],
        vocab_size=30,
        frontend="nemo",
        max_duration=10.0,
        num_buckets=1,
        num_workers=0,
        prepare_num_workers=1,
    )
    dm.prepare_data()  # 51 characters in 1 s: within what preparation lets through
    dm.setup("fit")
    assert len(dm.tokenizer.encode(texts["c"])) > 100 // 8
    with caplog.at_level(logging.WARNING, logger="asr_plugin.data.loading.datamodule"):
        dm.drop_untrainable(lambda frames: torch.div(frames, 8, rounding_mode="floor"))  # 1 s: 100 frames, 12 tokens
    assert sorted(text for batch in dm.train_dataloader() for text in batch.texts) == [texts["a"], texts["b"]]
    assert [batch.texts for batch in dm.val_dataloader()] == [[texts["d"]]]
    warnings = [record.getMessage() for record in caplog.records]
    for name, line in (("training", "train-000003"), ("valid", "valid-000001")):
        assert any(message.startswith(f"{name}: left out 1 utterance(s)") and line in message for message in warnings)


@pytest.mark.parametrize("kind", SOURCES)
def test_a_duplicate_is_left_out_naming_the_first(kind, tmp_path):
    """Two cuts of one id, or a NeMo line given twice: scored (or trained on) twice otherwise."""
    write, source_of = SOURCES[kind]
    manifest, _ = write("10 MB transcript", tmp_path)  # any two-line manifest; its second line is replaced
    if kind == "nemo":
        first = manifest.read_text().splitlines()[0]
        manifest.write_text(f"{first}\n{first}\n")
    else:
        with gzip.open(manifest, "rt") as handle:
            first = handle.readline()
        with gzip.open(manifest, "wt") as handle:
            handle.write(first + first.replace('"fine.flac', '"other.flac'))  # the same cut id, another file
    layout = CorpusLayout(None, tmp_path / "work")
    out = prepare_split(layout, "train", source=source_of(manifest), progress=False)
    assert len(read_manifest(out)) == 1
    (listed,) = layout.skip_list("train").read_text().splitlines()
    where, reason = listed.split("\t")
    assert where.split(" ")[0] == f"{manifest}:2"
    assert reason == ("the audio segment" if kind == "nemo" else "utterance id 'fine'") + f" of {manifest}:1 again"


def test_a_path_with_a_tab_or_newline_stays_one_line_of_the_skip_list(tmp_path):
    good = write_flac(tmp_path / "fine.flac", 1.0)
    odd = tmp_path / "a\tb\nc.flac"  # missing, and its name would split the line in two fields and two lines
    manifest = tmp_path / "train.json"
    lines = [
        {"audio_filepath": str(good), "duration": 1.0, "text": "FINE"},
        {**{"audio_filepath": str(odd)}, "duration": 1.0, "text": "ODD"},
    ]
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    layout = CorpusLayout(None, tmp_path / "work")
    prepare_split(layout, "train", source=NemoManifestSource(train_manifests=[str(manifest)]), progress=False)
    (listed,) = layout.skip_list("train").read_text().splitlines()
    where, reason = listed.rsplit("\t", 1)
    assert json.loads(where) == f"{manifest}:2 ({odd})" and reason == "missing"
