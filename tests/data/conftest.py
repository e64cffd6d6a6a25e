"""Fixtures for the data tests: a tiny synthetic mini corpus, a data module prepared on it, and the same
utterances as segments of long 48 kHz stereo recordings behind NeMo manifests, lhotse cut manifests and a Shar
directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from built_once import copy_of
from data_helpers import SMALL, SMALL_LOADER
from own_corpora import lhotse_cuts, write_long_recordings, write_nemo_manifest, write_shar

from asr_plugin.data import TransducerDataModule


@pytest.fixture(scope="session")
def mini_root(tiny_corpus, tmp_path_factory) -> Path:
    """The tiny mini corpus (train 24, dev 8, each test split 8): this folder's own copy of the session's."""
    return copy_of(tiny_corpus, tmp_path_factory.mktemp("mini") / "corpus")


@pytest.fixture(scope="session")
def prepared_module(mini_root, tmp_path_factory) -> TransducerDataModule:
    """A data module over `mini_root` after prepare_data() and setup("fit")."""
    dm = TransducerDataModule(
        root=str(mini_root),
        work_dir=str(tmp_path_factory.mktemp("manifests")),
        corpus="mini",
        train_splits=["train"],
        valid_splits=["dev"],
        test_splits=["dev", "test-piper"],
        **SMALL_LOADER,
        mini_corpus=SMALL,
    )
    dm.prepare_data()
    dm.setup("fit")
    return dm


# the own-data corpora's sets and the mini corpus splits they are made from
OWN_DATA_SPLITS = {"train": "train", "dev": "dev", "test": "test-espeak"}


@pytest.fixture(scope="session")
def nemo_corpus(mini_root, tmp_path_factory):
    """({split: NeMo manifest}, {split: segments}): the small mini corpus as long 48 kHz stereo recordings
    (wav, flac, ogg, mp3), each utterance a segment (an offset), paths relative to the manifests."""
    out = tmp_path_factory.mktemp("nemo_corpus")
    segments = {name: write_long_recordings(mini_root, split, out) for name, split in OWN_DATA_SPLITS.items()}
    return {split: write_nemo_manifest(segments[split], out / f"{split}.json") for split in segments}, segments


@pytest.fixture(scope="session")
def cut_corpus(mini_root, tmp_path_factory):
    """({split: lhotse cut manifest}, {split: segments}): the same in wav and flac (what lhotse itself reads
    without ffmpeg), cuts made with lhotse's own classes."""
    pytest.importorskip("lhotse")
    out = tmp_path_factory.mktemp("cut_corpus")
    lossless = (("wav", "WAV", "PCM_16"), ("flac", "FLAC", "PCM_24"))
    segments = {
        name: write_long_recordings(mini_root, split, out, formats=lossless) for name, split in OWN_DATA_SPLITS.items()
    }
    manifests = {split: out / f"{split}_cuts.jsonl.gz" for split in segments}
    for split, path in manifests.items():
        lhotse_cuts(segments[split]).to_file(path)
    return manifests, segments


SHAR_SHARD_SIZE = 5  # 24 training cuts -> 5 shards: 2 ranks x 2 workers get unequal shares


@pytest.fixture(scope="session")
def shar_corpus(cut_corpus, tmp_path_factory):
    """(Shar directory of the training cuts, 48 kHz stereo flac in 5 shards; the cut manifests; the segments)."""
    manifests, segments = cut_corpus
    from lhotse import CutSet

    out = tmp_path_factory.mktemp("shar_corpus") / "train_shar"
    return write_shar(CutSet.from_file(manifests["train"]), out, SHAR_SHARD_SIZE), manifests, segments
