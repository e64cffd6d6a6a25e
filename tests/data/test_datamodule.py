"""TransducerDataModule: preparation, Batch contents, evaluation loaders, Hydra configs, resume, the checks at
setup, and the tokenizer and front-end options."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import hydra
import pytest
import sentencepiece as spm
import torch
from data_helpers import SMALL, write_small_librispeech
from omegaconf import OmegaConf

from asr_plugin.audio import load_audio
from asr_plugin.data import Batch, ResumableDataLoader, TransducerDataModule, read_manifest
from asr_plugin.frontend.logmel import FeatureStats
from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.frontend.spec import build_frontend, complete_frontend_spec
from asr_plugin.text import Tokenizer

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
    durations = {
        e.id: e.duration for split in ("train", "dev", "test-piper") for e in read_manifest(dm.split_manifest(split))
    }
    for b in range(B):
        T, U = batch.feature_lengths[b], batch.target_lengths[b]
        assert T == int(round(durations[batch.ids[b]] * 16000)) // 160 + 1  # the exact frame formula
        assert (batch.features[b, T:] == 0).all()
        tokens = batch.targets[b, :U]
        assert (tokens > 0).all() and (batch.targets[b, U:] == 0).all()
        assert dm.tokenizer.decode(tokens.tolist()) == batch.texts[b]


def test_prepare_makes_everything(prepared_module):
    dm = prepared_module
    for split in ("train", "dev", "test-piper"):
        assert dm.split_manifest(split).exists()
    assert dm.tokenizer_path.name == "tokenizer_bpe48.model" and dm.stats_path.exists()
    assert dm.vocab_size == dm.tokenizer.vocab_size == 48 and dm.tokenizer.blank_id == 0
    assert sorted(dm.test_manifests) == ["dev", "test-piper"]


def test_prepare_is_idempotent(prepared_module):
    files = [p for p in prepared_module.work_dir.iterdir()] + list(prepared_module.root.rglob("*.flac"))
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
    features = torch.cat([b.features[i, : b.feature_lengths[i]] for b in batches for i in range(len(b))])
    assert features.mean().abs() < 0.1 and (features.std() - 1).abs() < 0.1  # globally normalised


def test_eval_loaders_are_sorted(prepared_module):
    dm = prepared_module
    for loader in (
        dm.val_dataloader(),
        dm.eval_dataloader("test-piper"),
        dm.eval_dataloader(dm.split_manifest("test-piper")),
    ):
        batches = list(loader)
        lengths = [int(t) for b in batches for t in b.feature_lengths]
        assert lengths == sorted(lengths)
        for batch in batches:
            _check_batch(batch, dm)
    tests = dm.test_dataloader()
    assert len(tests) == 2 and sum(len(b) for b in tests[1]) == SMALL["n_test"]


def test_worker_processes_and_speed_perturb(prepared_module):
    dm = TransducerDataModule(
        root=str(prepared_module.root),
        work_dir=str(prepared_module.work_dir),
        corpus="mini",
        train_splits=["train"],
        valid_splits=["dev"],
        test_splits=["test-piper"],
        vocab_size=48,
        max_duration=10.0,
        num_workers=1,
        speed_perturb=[0.9, 1.1],
        mini_corpus=SMALL,
    )
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
    dm = TransducerDataModule(root=str(tmp_path / "c"), work_dir=str(tmp_path / "m"), corpus="mini")
    with pytest.raises(FileNotFoundError, match="call prepare_data"):
        dm.tokenizer
    with pytest.raises(FileNotFoundError, match="call prepare_data"):
        dm.setup("fit")
    with pytest.raises(
        ValueError, match=r"data.corpus='timit': choose one of \['lhotse', 'librispeech', 'mini', 'nemo'\]"
    ):
        TransducerDataModule(root="r", work_dir="m", corpus="timit")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['data.train_manifests'\]"):
        TransducerDataModule(root="r", work_dir="m", corpus="mini", train_manifests=["a.json"])


@pytest.mark.parametrize("name", ["mini", "librispeech", "nemo", "lhotse"])
def test_hydra_configs_instantiate(name, tmp_path):
    cfg = OmegaConf.create(
        {
            "paths": {
                "root_dir": str(tmp_path),
                "data_dir": str(tmp_path / "data"),
                "output_dir": str(tmp_path / "out"),
            },
            "data": OmegaConf.load(CONF / f"{name}.yaml"),
        }
    )
    cfg.data.vocab_size = 77
    cfg.data.max_duration = 33.0
    cfg.data.num_workers = 0
    dm = hydra.utils.instantiate(cfg.data)
    assert isinstance(dm, TransducerDataModule) and dm.corpus == name
    corpus_dir = {"mini": "mini_librispeech"}.get(name, name)
    assert dm.tokenizer_path == tmp_path / "data" / "manifests" / corpus_dir / "tokenizer_bpe77.model"
    assert dm.max_duration == 33.0 and dm.num_workers == 0 and dm.feature_dim == 80
    if name in ("mini", "librispeech"):
        assert str(dm.root).startswith(str(tmp_path / "data"))
    else:  # manifest sources have no corpus directory, and no set until the manifests are given
        assert dm.root is None and dm.train_splits == dm.valid_splits == dm.test_splits == []


def test_every_training_utterance_is_kept_unless_a_cut_is_asked_for(prepared_module):
    dm = prepared_module
    entries = read_manifest(dm.split_manifest("train"))
    cut = sorted(e.duration for e in entries)[len(entries) // 2]
    kwargs = dict(
        root=str(dm.root),
        work_dir=str(dm.work_dir),
        corpus="mini",
        train_splits=["train"],
        valid_splits=["dev"],
        vocab_size=48,
        max_duration=10.0,
        num_workers=0,
        quadratic_duration=20.0,
    )
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


# ---- the data-module options a checkpoint's tokenizer and front end come through -----------------------
def _small_module(corpus_root, work_dir, **kwargs) -> TransducerDataModule:
    options = dict(
        root=str(corpus_root),
        work_dir=str(work_dir),
        train_splits=["train-clean-100"],
        valid_splits=["dev-clean"],
        test_splits=["dev-clean"],
        vocab_size=30,
        max_duration=10.0,
        num_buckets=1,
        num_workers=0,
        prepare_num_workers=1,
    )
    return TransducerDataModule(**{**options, **kwargs})


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    return write_small_librispeech(tmp_path_factory.mktemp("small") / "LibriSpeech")


@pytest.fixture(scope="module")
def lower_case_nemo_tokenizer(tmp_path_factory) -> Tokenizer:
    """A NeMo-convention tokenizer (no blank piece, lower-case vocabulary) for the small corpus' words."""
    prefix = tmp_path_factory.mktemp("nemo_tok") / "tokenizer"
    texts = [f"the cat dog sees a red big small house tree cafe naive {w}" for w in ("x", "y", "z")]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_prefix=str(prefix),
        vocab_size=40,
        model_type="bpe",
        character_coverage=1.0,
        minloglevel=2,
    )
    return Tokenizer(prefix.with_suffix(".model"), convention="nemo")


def test_missing_and_empty_audio_are_listed_at_setup(small_corpus, tmp_path):
    corpus = tmp_path / "LibriSpeech"
    shutil.copytree(small_corpus, corpus)
    _small_module(corpus, tmp_path / "work").prepare_data()
    gone = sorted((corpus / "train-clean-100").rglob("*.flac"))
    gone[3].unlink()
    gone[5].write_bytes(b"")
    with pytest.raises(FileNotFoundError) as error:
        _small_module(corpus, tmp_path / "work").setup("fit")
    message = str(error.value)
    assert "2 of 12 audio file(s) missing or empty" in message and "--overwrite" in message
    assert f"{gone[3]}: missing" in message and f"{gone[5]}: empty (0 bytes)" in message


def test_setup_names_what_is_missing_and_the_command(small_corpus, tmp_path):
    dm = _small_module(small_corpus, tmp_path / "work")
    with pytest.raises(
        FileNotFoundError,
        match=r"(?s)train-clean-100.jsonl.*python scripts/prepare_data.py "
        r"data=librispeech data.root=",
    ):
        dm.setup("fit")


def test_accented_transcripts_are_normalised_and_counted(small_corpus, tmp_path, caplog):
    dm = _small_module(small_corpus, tmp_path / "work")
    dm.prepare_data()
    with caplog.at_level(logging.WARNING):
        dm.setup("fit")
    counts = dm.normalization_counts["train-clean-100"]
    assert (counts.mapped, counts.dropped, counts.texts, counts.total) == (2, 0, 2, 12)
    assert dm.normalization_counts["dev-clean"].changed == 0
    assert "train-clean-100: 2 of 12 transcripts changed: 2 accented character(s)" in caplog.text
    texts = {text for batch in dm.train_dataloader() for text in batch.texts}
    assert {"THE CAFE SEES A DOG", "NAIVE CAT"} <= texts


def test_a_given_tokenizer_is_used_and_scores_its_own_references(small_corpus, tmp_path, lower_case_nemo_tokenizer):
    tokenizer = lower_case_nemo_tokenizer
    dm = _small_module(small_corpus, tmp_path / "work", tokenizer=tokenizer)
    assert dm.tokenizer is tokenizer and dm.tokenizer_path is None
    dm.prepare_data()
    assert not list((tmp_path / "work").glob("tokenizer_*")) and dm.missing_prepared() == []
    dm.setup("fit")
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        for batch in loader:
            for b in range(len(batch)):
                assert batch.texts[b] == batch.texts[b].lower() == tokenizer.normalize(batch.texts[b].upper())
                tokens = batch.targets[b, : batch.target_lengths[b]].tolist()
                assert tokenizer.decode(tokens) == batch.texts[b] and 0 not in tokens
    with pytest.raises(TypeError, match="data.tokenizer must build"):
        _small_module(small_corpus, tmp_path / "work", tokenizer="tokenizer.model")


def test_a_front_end_kind_alone_means_its_default_options(small_corpus, tmp_path):
    # data.frontend=nemo in a config: a string, so a spec merged over it (a .nemo's front end) replaces it whole
    dm = _small_module(small_corpus, tmp_path / "work", frontend="nemo")
    assert dm.frontend_spec == complete_frontend_spec({"kind": "nemo"}) and dm.stats_path is None
    logmel = _small_module(small_corpus, tmp_path / "work", frontend="logmel")
    assert logmel.stats_path is not None and logmel.feature_dim == 80
    with pytest.raises(ValueError, match="kind must be one of .*'mfcc'"):
        _small_module(small_corpus, tmp_path / "work", frontend="mfcc")


def test_a_nemo_front_end_needs_no_statistics_and_dithers_in_training_only(small_corpus, tmp_path):
    spec = {"kind": "nemo", "options": {"num_mel_bins": 64, "dither": 0.01}}
    dm = _small_module(small_corpus, tmp_path / "work", frontend=spec)
    assert dm.feature_dim == 64 and dm.stats_path is None
    dm.prepare_data()
    assert not (tmp_path / "work" / "feature_stats.json").exists()
    dm.setup("fit")
    assert dm.frontend_spec["kind"] == "nemo" and dm.frontend_spec["options"]["dither"] == 0.01
    reference = NemoMelFrontend(num_mel_bins=64, dither=0.01).eval()
    val = dm.val_dataloader()
    for batch in val:
        for b, utt_id in enumerate(batch.ids):
            entry = next(e for e in val.dataset.entries if e.id == utt_id)
            audio = load_audio(entry.path)
            expected = reference(audio[None], torch.tensor([audio.numel()]))[0][0]
            torch.testing.assert_close(batch.features[b, : batch.feature_lengths[b]], expected)
    train = dm.train_dataloader().dataset
    assert train.frontend.training and not val.dataset.frontend.training
    first, second = train[0].features, train[0].features
    assert not torch.equal(first, second)  # fresh dither each time
    with pytest.raises(ValueError, match="data.num_mel_bins=80 but data.frontend has 64"):
        _small_module(small_corpus, tmp_path / "work", frontend=spec, num_mel_bins=80)


def test_the_frontend_spec_rebuilds_the_batch_features(prepared_module):
    dm = prepared_module
    spec = dm.frontend_spec
    stats = FeatureStats.load(dm.stats_path)
    assert spec["kind"] == "logmel" and spec["mean"] == pytest.approx(stats.mean.tolist())
    frontend = build_frontend(spec).eval()
    loader = dm.val_dataloader()
    batch = next(iter(loader))
    entry = next(e for e in loader.dataset.entries if e.id == batch.ids[0])
    audio = load_audio(entry.path)
    features, frames = frontend(audio[None], torch.tensor([audio.numel()]))
    torch.testing.assert_close(batch.features[0, : batch.feature_lengths[0]], features[0, : int(frames[0])])
