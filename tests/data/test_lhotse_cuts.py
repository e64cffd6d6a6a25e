"""lhotse cut manifests as a data source: cuts written with lhotse's own classes over long 48 kHz stereo
recordings, unusable cuts listed with manifest:line, and the audio we load checked against lhotse's own."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from data_helpers import SMALL, SMALL_LOADER

from asr_plugin.data import CorpusLayout, LhotseCutsSource, TransducerDataModule, prepare_split, read_manifest

lhotse = pytest.importorskip("lhotse")


def test_cuts_become_segments_of_their_recordings(cut_corpus):
    manifests, segments = cut_corpus
    candidates, skipped = LhotseCutsSource(train_cuts=[str(manifests["train"])]).scan("train")
    assert skipped == []
    assert [(c.id, c.path, c.text, c.speaker) for c in candidates] == [
        (s.id, str(s.path), s.text, s.speaker) for s in segments["train"]
    ]
    for candidate, segment in zip(candidates, segments["train"]):
        assert candidate.offset == pytest.approx(segment.offset, abs=1e-6)
        assert candidate.duration == pytest.approx(segment.duration, abs=1e-6)


def test_unusable_cuts_are_listed_with_their_line(cut_corpus, tmp_path):
    manifests, _ = cut_corpus
    with gzip.open(manifests["dev"], "rt") as handle:
        records = [json.loads(line) for line in handle]
    url = json.loads(json.dumps(records[1]))
    url["recording"]["sources"][0].update(type="url", source="https://example.com/a.wav")
    silent = json.loads(json.dumps(records[2]))
    silent["supervisions"] = []
    lines = [json.dumps(records[0]), json.dumps(url), json.dumps(silent), '{"type": "MonoCut"}', json.dumps(records[3])]
    path = tmp_path / "cuts.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    layout = CorpusLayout(None, tmp_path / "work")
    out = prepare_split(layout, "train", source=LhotseCutsSource(train_cuts=str(path)), progress=False)
    assert [e.id for e in read_manifest(out)] == [records[0]["id"], records[3]["id"]]
    listed = layout.skip_list("train").read_text().splitlines()
    assert [line.split("\t")[0] for line in listed] == [f"{path}:{n}" for n in (2, 3, 4)]
    assert "audio is not one file (sources: url)" in listed[0] and "has no transcript" in listed[1]
    assert "not a lhotse cut" in listed[2]


def test_the_audio_we_load_is_lhotses_own(cut_corpus, tmp_path):
    manifests, _ = cut_corpus
    dm = TransducerDataModule(
        work_dir=str(tmp_path / "work"),
        corpus="lhotse",
        train_cuts=[str(manifests["train"])],
        valid_cuts=str(manifests["dev"]),
        **SMALL_LOADER,
    )
    dm.prepare_data()
    dm.setup("fit")
    entries = read_manifest(dm.split_manifest("train"))
    cuts = {cut.id: cut for cut in lhotse.CutSet.from_file(manifests["train"])}
    for entry in entries[:6]:
        theirs = cuts[entry.id].resample(16000).load_audio().mean(axis=0)  # (C, N) -> (N,)
        ours = entry.load_audio(16000).numpy()
        assert abs(len(ours) - len(theirs)) <= 1
        n = min(len(ours), len(theirs))
        snr_db = 20 * np.log10(np.linalg.norm(theirs[:n]) / np.linalg.norm(ours[:n] - theirs[:n]))
        assert snr_db > 30.0, entry.id  # two resamplers (libsoxr, lhotse's), the same signal
    assert sum(len(b) for b in dm.train_dataloader()) == SMALL["n_train"]
