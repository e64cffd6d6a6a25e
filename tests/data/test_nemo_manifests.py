"""NeMo manifests as a data source: NeMo's keys and path rules, segments of long 48 kHz stereo recordings,
every unusable line listed with manifest:line (nothing dropped silently), strict refusal, and the data module
on them (its audio checked against the mini corpus's original 16 kHz files)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch
from data_helpers import SMALL, SMALL_LOADER, write_flac

from asr_plugin.data import CorpusLayout, NemoManifestSource, TransducerDataModule, prepare_split, read_manifest


def _lines(path, records) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))


def test_paths_are_resolved_as_nemo_does_and_extra_keys_ignored(tmp_path, monkeypatch):
    data = tmp_path / "set"
    write_flac(data / "clips" / "a.flac", 1.0)
    write_flac(tmp_path / "cwd" / "b.flac", 1.0)
    absolute = write_flac(tmp_path / "elsewhere" / "c.flac", 2.0)
    _lines(
        data / "train.json",
        [
            {"audio_filepath": "clips/a.flac", "duration": 1.0, "text": "hello  there", "lang": "en", "pnc": True},
            {"audio_filepath": "b.flac", "duration": 1.0, "text": "from the cwd", "speaker": 7},  # not next to it
            {"audio_filepath": str(absolute), "duration": 0.5, "offset": 1.25, "text": "a segment"},
        ],
    )
    monkeypatch.chdir(tmp_path / "cwd")
    source = NemoManifestSource(train_manifests=[str(data / "train.json")])
    candidates, skipped = source.scan("train")
    assert skipped == [] and source.train_splits == ("train",) and source.valid_splits == ()
    assert [c.path for c in candidates] == [
        str(data / "clips" / "a.flac"),
        str(tmp_path / "cwd" / "b.flac"),
        str(absolute),
    ]
    assert [(c.id, c.text, c.offset, c.duration, c.speaker) for c in candidates] == [
        ("train-000001", "hello there", 0.0, 1.0, None),
        ("train-000002", "from the cwd", 0.0, 1.0, "7"),
        ("train-000003", "a segment", 1.25, 0.5, None),
    ]
    assert candidates[0].where == f"{data / 'train.json'}:1"


def test_every_unusable_line_is_listed_with_its_line_and_strict_refuses(tmp_path, capsys):
    write_flac(tmp_path / "long.flac", 3.0)
    write_flac(tmp_path / "short.flac", 1.0)
    good = {"audio_filepath": "long.flac", "duration": 1.0, "offset": 1.0, "text": "fine"}
    bad = [
        {**good, "audio_filepath": "missing.flac"},  # 2
        {"audio_filepath": "long.flac", "text": "no duration"},  # 3
        {**good, "offset": 5.0},  # 4 past the end
        {**good, "offset": 2.5},  # 5 runs past the end
        {"audio_filepath": "short.flac", "duration": 2.0, "text": "disagrees"},  # 6 whole file, wrong
        {**good, "text": "   "},  # 7
        {**good, "duration": -1},  # 8
        "not json",  # 9
    ]
    manifest = tmp_path / "m.json"
    _lines(manifest, [good, *bad, *({**good, "offset": 9.0 + i} for i in range(20))])  # distinct: not duplicates
    raw = manifest.read_bytes() + json.dumps({**good, "text": "caf"}).encode().replace(b"caf", b"caf\xe9") + b"\n"
    manifest.write_bytes(raw)  # line 30: Latin-1, not UTF-8
    layout = CorpusLayout(None, tmp_path / "work")
    source = NemoManifestSource(train_manifests=[str(manifest)])
    out = prepare_split(layout, "train", source=source, progress=False)
    assert [e.offset for e in read_manifest(out)] == [1.0]  # one usable line of 30
    listed = layout.skip_list("train").read_text().splitlines()
    assert len(listed) == 29  # nothing dropped silently: every other line is listed
    reasons = {int(line.split("\t")[0].split(" ")[0].rsplit(":", 1)[1]): line.split("\t")[1] for line in listed}
    assert reasons[2] == "missing" or "unreadable audio" in reasons[2]
    assert "missing key(s) ['duration']" in reasons[3]
    assert reasons[4].startswith("offset 5 s is past the end of the audio (3.000 s)")
    assert "runs past the end of the audio" in reasons[5]
    assert reasons[6] == (
        "duration 2 s from offset 0 s runs past the end of the audio (1.000 s): the manifest's "
        "duration disagrees with the file"
    )
    assert reasons[7].startswith("empty transcript") and "positive number" in reasons[8]
    assert reasons[9].startswith("not valid JSON") and reasons[30].startswith("not UTF-8 text")
    printed = capsys.readouterr().out
    assert "29 utterance(s) or file(s) left out" in printed and "... and 9 more" in printed  # the first 20 shown
    with pytest.raises(ValueError, match=r"(?s)29 utterance\(s\).*strict mode.*m.json:2 .*\.\.\. and 9 more"):
        prepare_split(CorpusLayout(None, tmp_path / "strict"), "train", source=source, strict=True, progress=False)
    assert not (tmp_path / "strict" / "train.jsonl").exists()


def test_missing_manifests_and_set_names_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data.train_manifests: .*nope.json"):
        NemoManifestSource(train_manifests=[str(tmp_path / "nope.json")])
    (tmp_path / "a.json").write_text("")
    with pytest.raises(ValueError, match=r"data.test_manifests: the names \['valid'\] are"):
        NemoManifestSource(test_manifests={"valid": str(tmp_path / "a.json")})
    assert NemoManifestSource(test_manifests=[str(tmp_path / "a.json")]).test_splits == ("a",)


def test_the_data_module_trains_on_segments_of_48khz_stereo_recordings(nemo_corpus, tmp_path):
    manifests, segments = nemo_corpus
    dm = TransducerDataModule(
        work_dir=str(tmp_path / "work"),
        corpus="nemo",
        train_manifests=[str(manifests["train"])],
        valid_manifests=str(manifests["dev"]),
        test_manifests={"mine": str(manifests["test"])},
        **SMALL_LOADER,
    )
    dm.prepare_data()
    dm.setup("fit")
    assert dm.test_splits == ["mine"] and set(dm.test_manifests) == {"mine"}
    train = read_manifest(dm.split_manifest("train"))
    assert len(train) == SMALL["n_train"] and all(e.offset is not None for e in train)
    batches = list(dm.train_dataloader())
    assert sum(len(b) for b in batches) == SMALL["n_train"]
    assert {t for b in batches for t in b.texts} <= {e.text.upper() for e in train}
    # the loaded segment is the original 16 kHz utterance (upsampled to 48 kHz, made stereo, and back)
    for entry, segment in zip(train, segments["train"]):
        ours = entry.load_audio(16000).numpy()
        original = sf.read(segment.original, dtype="float32")[0]
        assert len(ours) == len(original), segment
        # the resampling filters remove the corpus's noise near 8 kHz, lossy codecs more
        snr_db = 20 * np.log10(np.linalg.norm(original) / np.linalg.norm(ours - original))
        assert snr_db > (15.0 if segment.path.suffix in (".ogg", ".mp3") else 20.0), segment
    loader = dm.eval_dataloader("mine")
    assert sum(len(b) for b in loader) == SMALL["n_test"] and torch.isfinite(next(iter(loader)).features).all()


def test_a_changed_manifest_list_is_not_served_from_the_old_work_dir(nemo_corpus, tmp_path):
    manifests, _ = nemo_corpus
    common = dict(
        work_dir=str(tmp_path / "work"),
        corpus="nemo",
        valid_manifests=str(manifests["dev"]),
        tokenizer_type="bpe",
        vocab_size=48,
        num_workers=0,
        prepare_num_workers=1,
    )
    TransducerDataModule(train_manifests=[str(manifests["train"])], **common).prepare_data()
    with pytest.raises(ValueError, match=r"train.jsonl was made from .*train.json.*set data.work_dir to another"):
        TransducerDataModule(train_manifests=[str(manifests["test"])], **common).prepare_data()


def test_the_data_module_says_what_preparation_left_out_and_how_to_fix_it(tmp_path, caplog):
    for name in ("a", "b", "c"):
        write_flac(tmp_path / f"{name}.flac", 1.0, seed=ord(name))
    _lines(
        tmp_path / "train.json",
        [{"audio_filepath": f"{n}.flac", "duration": 1.0, "text": "a b c"} for n in "ab"]
        + [{"audio_filepath": "gone.flac", "duration": 1.0, "text": "lost"}],
    )
    _lines(tmp_path / "dev.json", [{"audio_filepath": "c.flac", "duration": 1.0, "text": "a b"}])
    dm = TransducerDataModule(
        work_dir=str(tmp_path / "work"),
        corpus="nemo",
        train_manifests=str(tmp_path / "train.json"),
        valid_manifests=str(tmp_path / "dev.json"),
        vocab_size=8,
        num_workers=0,
        prepare_num_workers=1,
    )
    dm.prepare_data()
    dm.setup("fit")
    assert "train: 1 item(s) were left out of this set when it was prepared, listed in" in caplog.text
    assert "scripts/prepare_data.py data=nemo 'data.train_manifests=[" in caplog.text
    assert "--steps manifests --overwrite" in caplog.text
