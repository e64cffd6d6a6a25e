"""The data of the NeMo reference's fine-tuning (asr_plugin.benchmarks.nemo_reference), without NeMo: NeMo
pretrains on the first training utterances, the fine-tuning (NeMo's and the recipe's ``data=nemo`` run) gets
the others, sentences the pretraining never heard."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from asr_plugin.benchmarks.nemo_reference import (
    CONF_DIR,
    FineTuneSettings,
    NemoReference,
    fine_tuning_manifest,
    read_nemo_manifest,
    recipe_overrides,
    write_nemo_manifests,
)
from asr_plugin.data import make_mini_librispeech


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
    assert fine_tuning_manifest(reference, FineTuneSettings()) == manifests["finetune"]
    assert fine_tuning_manifest(reference, FineTuneSettings(data="train")) == manifests["train"]
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
        fine_tuning_manifest(reference_of(manifests, tmp_path), FineTuneSettings())
    with pytest.raises(ValueError, match=r"pretrain_utterances=7 must lie in \[1, 6\]"):
        write_nemo_manifests(corpus, tmp_path / "other", 7)
