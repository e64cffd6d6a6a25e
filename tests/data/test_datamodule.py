"""TransducerDataModule: preparation, Batch contents, evaluation loaders, Hydra configs, resume."""

from __future__ import annotations

from pathlib import Path

import hydra
import pytest
import torch
from data_helpers import SMALL
from omegaconf import OmegaConf

from asr_plugin.data import Batch, ResumableDataLoader, TransducerDataModule, read_manifest

CONF = Path(__file__).resolve().parents[2] / "conf" / "data"


def _check_batch(batch, dm):
    assert isinstance(batch, Batch)
    B = len(batch)
    assert batch.features.dtype == torch.float32 and batch.features.shape[0] == B
    assert batch.features.shape[2] == dm.feature_dim == 80
    assert batch.feature_lengths.dtype == torch.int64 and batch.targets.dtype == torch.int64
    assert batch.feature_lengths.max() == batch.features.shape[1]
    assert batch.target_lengths.max() == batch.targets.shape[1]
    assert len(batch.ids) == len(batch.texts) == B
    durations = {e.id: e.duration for split in ("train", "dev", "test")
                 for e in read_manifest(dm.split_manifest(split))}
    for b in range(B):
        T, U = batch.feature_lengths[b], batch.target_lengths[b]
        assert T == int(round(durations[batch.ids[b]] * 16000)) // 160 + 1  # the exact frame formula
        assert (batch.features[b, T:] == 0).all()
        tokens = batch.targets[b, :U]
        assert (tokens > 0).all() and (batch.targets[b, U:] == 0).all()
        assert dm.tokenizer.decode(tokens.tolist()) == batch.texts[b]


def test_prepare_makes_everything(prepared_module):
    dm = prepared_module
    for split in ("train", "dev", "test"):
        assert dm.split_manifest(split).exists()
    assert dm.tokenizer_path.name == "tokenizer_bpe48.model" and dm.stats_path.exists()
    assert dm.vocab_size == dm.tokenizer.vocab_size == 48 and dm.tokenizer.blank_id == 0
    assert sorted(dm.test_manifests) == ["dev", "test"]


def test_prepare_is_idempotent(prepared_module):
    files = [p for p in prepared_module.manifest_dir.iterdir()] + list(prepared_module.root.rglob("*.flac"))
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    prepared_module.prepare_data()
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes


def test_train_batches(prepared_module):
    dm = prepared_module
    loader = dm.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader) > 1
    assert sorted(i for b in batches for i in b.ids) == sorted(e.id for e in read_manifest(dm.split_manifest("train")))
    for batch in batches:
        _check_batch(batch, dm)
    features = torch.cat([b.features[i, :b.feature_lengths[i]] for b in batches for i in range(len(b))])
    assert features.mean().abs() < 0.1 and (features.std() - 1).abs() < 0.1  # globally normalised


def test_eval_loaders_are_sorted(prepared_module):
    dm = prepared_module
    for loader in (dm.val_dataloader(), dm.eval_dataloader("test"), dm.eval_dataloader(dm.split_manifest("test"))):
        batches = list(loader)
        lengths = [int(t) for b in batches for t in b.feature_lengths]
        assert lengths == sorted(lengths)
        for batch in batches:
            _check_batch(batch, dm)
    tests = dm.test_dataloader()
    assert len(tests) == 2 and sum(len(b) for b in tests[1]) == SMALL["n_test"]


def test_worker_processes_and_speed_perturb(prepared_module):
    dm = TransducerDataModule(root=str(prepared_module.root), manifest_dir=str(prepared_module.manifest_dir),
                              corpus="mini", train_splits=["train"], valid_splits=["dev"], test_splits=["test"],
                              vocab_size=48, max_duration=10.0, num_workers=1, speed_perturb=[0.9, 1.1],
                              mini_corpus=SMALL)
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert isinstance(batch, Batch) and batch.features.shape[-1] == 80


def test_resumable_loader_state(prepared_module):
    loader = prepared_module.train_dataloader()
    assert isinstance(loader, ResumableDataLoader)
    loader.batch_sampler.set_epoch(1)
    full = [b.ids for b in loader]
    iterator = iter(loader)
    next(iterator), next(iterator)
    state = loader.state_dict()
    assert state["epoch"] == 1 and state["batches_consumed"] == 2
    fresh = prepared_module.train_dataloader()
    fresh.load_state_dict(state)
    fresh.batch_sampler.set_epoch(1)
    assert [b.ids for b in fresh] == full[2:]
    assert fresh.state_dict()["batches_consumed"] == len(full)


def test_errors_before_prepare(tmp_path):
    dm = TransducerDataModule(root=str(tmp_path / "c"), manifest_dir=str(tmp_path / "m"), corpus="mini")
    with pytest.raises(FileNotFoundError, match="call prepare_data"):
        dm.tokenizer
    with pytest.raises(FileNotFoundError, match="call prepare_data"):
        dm.setup("fit")
    with pytest.raises(ValueError, match="corpus must be one of"):
        TransducerDataModule(root="r", manifest_dir="m", corpus="timit")


@pytest.mark.parametrize("name", ["mini", "librispeech"])
def test_hydra_configs_instantiate(name, tmp_path):
    cfg = OmegaConf.create({"paths": {"root_dir": str(tmp_path), "data_dir": str(tmp_path / "data"),
                                      "output_dir": str(tmp_path / "out")},
                            "data": OmegaConf.load(CONF / f"{name}.yaml")})
    cfg.data.vocab_size = 77
    cfg.data.max_duration = 33.0
    cfg.data.num_workers = 0
    dm = hydra.utils.instantiate(cfg.data)
    assert isinstance(dm, TransducerDataModule) and dm.corpus == name
    corpus_dir = {"mini": "mini_librispeech", "librispeech": "librispeech"}[name]
    assert dm.tokenizer_path == tmp_path / "data" / "manifests" / corpus_dir / "tokenizer_bpe77.model"
    assert dm.max_duration == 33.0 and dm.num_workers == 0 and dm.feature_dim == 80
    assert str(dm.root).startswith(str(tmp_path / "data"))


def test_every_training_utterance_is_kept_unless_a_cut_is_asked_for(prepared_module):
    dm = prepared_module
    entries = read_manifest(dm.split_manifest("train"))
    cut = sorted(e.duration for e in entries)[len(entries) // 2]
    kwargs = dict(root=str(dm.root), manifest_dir=str(dm.manifest_dir), corpus="mini", train_splits=["train"],
                  valid_splits=["dev"], vocab_size=48, max_duration=10.0, num_workers=0, quadratic_duration=20.0)
    full = TransducerDataModule(**kwargs)
    full.setup("fit")
    assert len(full.train_dataloader().dataset) == len(entries)
    assert full.train_dataloader().batch_sampler.quadratic_duration == 20.0
    assert full.val_dataloader().batch_sampler.quadratic_duration is None  # evaluation batches are not charged
    short = TransducerDataModule(**kwargs, max_utterance_duration=cut)
    with pytest.warns(UserWarning, match="longer than"):
        short.setup("fit")
    assert len(short.train_dataloader().dataset) == sum(e.duration <= cut for e in entries) < len(entries)
    with pytest.raises(ValueError, match="exceeds max_duration"):
        TransducerDataModule(**{**kwargs, "max_utterance_duration": 11.0})
