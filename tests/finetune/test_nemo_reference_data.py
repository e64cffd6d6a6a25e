"""The data of the NeMo reference's fine-tuning (benchmarks.nemo_reference), without NeMo: NeMo
pretrains on the first training utterances, the fine-tuning (NeMo's and the recipe's ``data=nemo`` run) gets
the others, sentences the pretraining never heard, or another engine's speech."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
from hydra import compose, initialize_config_dir

from asr_plugin.data import make_mini_librispeech
from benchmarks.nemo_reference import (
    CONF_DIR,
    NEW_ENGINE,
    FineTuneSettings,
    NemoReference,
    fine_tuning_manifests,
    read_nemo_manifest,
    recipe_overrides,
    write_nemo_manifests,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_mini_librispeech(tmp_path_factory.mktemp("mini") / "corpus", 6, 2, 1, 0, ["espeak"])


def reference_of(manifests: dict[str, Path], directory: Path) -> NemoReference:
    models = {"rnnt": directory / "rnnt.nemo", "hybrid": directory / "hybrid.nemo"}
    return NemoReference(directory, directory, manifests, models, {}, {}, {}, {"ctc_weight": 0.5})


def test_pretraining_and_fine_tuning_split_the_training_utterances(corpus, tmp_path):
    manifests = write_nemo_manifests(corpus, tmp_path / "manifests", 4)
    train, pretrain, finetune = (read_nemo_manifest(manifests[key]) for key in ("train", "pretrain", "finetune"))
    assert (len(pretrain), len(finetune)) == (4, 2)
    assert pretrain + finetune == train  # in id order: the first four, then the rest
    assert not {e["text"] for e in pretrain} & {e["text"] for e in finetune}

    reference = reference_of(manifests, tmp_path)
    assert fine_tuning_manifests(reference, FineTuneSettings()) == (manifests["finetune"], manifests["dev"])
    assert fine_tuning_manifests(reference, FineTuneSettings(data="train")) == (manifests["train"], manifests["dev"])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=recipe_overrides(reference, "rnnt", "batched", tmp_path / "run"))
    assert cfg.data.corpus == "nemo"
    assert list(cfg.data.train_manifests) == [str(manifests["finetune"])]
    assert list(cfg.data.valid_manifests) == [str(manifests["dev"])]
    assert cfg.finetune.path == str(tmp_path / "rnnt.nemo")


def test_a_reference_pretrained_on_every_utterance_has_nothing_to_fine_tune_on(corpus, tmp_path):
    manifests = write_nemo_manifests(corpus, tmp_path / "manifests", 6)
    assert "finetune" not in manifests
    with pytest.raises(ValueError, match=r"FineTuneSettings.data='finetune'.*pretrain_utterances < n_train"):
        fine_tuning_manifests(reference_of(manifests, tmp_path), FineTuneSettings())
    with pytest.raises(ValueError, match=r"pretrain_utterances=7 must lie in \[1, 6\]"):
        write_nemo_manifests(corpus, tmp_path / "other", 7)


def test_another_engine_is_a_corpus_of_its_own_that_the_recipe_trains_and_validates_on(corpus, tmp_path):
    reference = reference_of(write_nemo_manifests(corpus, tmp_path / "manifests", 4), tmp_path)
    settings = FineTuneSettings(data=NEW_ENGINE, new_engine_utterances=(3, 2))
    train, dev = fine_tuning_manifests(reference, settings)
    train_entries, dev_entries = read_nemo_manifest(train), read_nemo_manifest(dev)
    assert (len(train_entries), len(dev_entries)) == (3, 2)
    assert all(f"/{NEW_ENGINE}_3_2_corpus/" in entry["audio_filepath"] for entry in train_entries + dev_entries)
    assert not {e["text"] for e in train_entries} & {e["text"] for e in dev_entries}
    assert fine_tuning_manifests(reference, settings) == (train, dev)  # made once, then reused
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=recipe_overrides(reference, "rnnt", "batched", tmp_path / "run", settings))
    assert (list(cfg.data.train_manifests), list(cfg.data.valid_manifests)) == ([str(train)], [str(dev)])


def test_silence_margins_pad_every_utterance_on_both_sides(corpus, tmp_path):
    plain = write_nemo_manifests(corpus, tmp_path / "plain", 4)
    padded = write_nemo_manifests(corpus, tmp_path / "padded", 4, silence_margin=0.25)
    for split in ("train", "pretrain", "finetune", "dev"):
        for before, after in zip(read_nemo_manifest(plain[split]), read_nemo_manifest(padded[split]), strict=True):
            original, rate = soundfile.read(before["audio_filepath"], dtype="float32")
            audio, padded_rate = soundfile.read(after["audio_filepath"], dtype="float32")
            margin = round(0.25 * rate)
            assert padded_rate == rate and len(audio) == len(original) + 2 * margin
            assert not audio[:margin].any() and not audio[-margin:].any()
            np.testing.assert_array_equal(audio[margin:-margin], original)
            assert after["duration"] == pytest.approx(before["duration"] + 0.5)
            assert after["text"] == before["text"]
            assert Path(after["audio_filepath"]).parents[1] == tmp_path / "padded" / "audio"
    wider = write_nemo_manifests(corpus, tmp_path / "padded", 4, silence_margin=0.5)  # the same directory
    entry = read_nemo_manifest(wider["dev"])[0]
    assert soundfile.info(entry["audio_filepath"]).duration == pytest.approx(entry["duration"], abs=1e-3)
