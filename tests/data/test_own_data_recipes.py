"""The recipes on your own data, as tiny runs: fine-tune an imported NeMo checkpoint on a NeMo manifest of
48 kHz stereo segments, evaluate it on another manifest, export it back to .nemo; train from scratch on
lhotse cuts and evaluate on a cut manifest (docs/data.md, "Your own data")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from nemo_models import write_synthetic_nemo
from tiny_models import MICRO_MODEL

from asr_plugin.evaluation import evaluate
from asr_plugin.formats import export_nemo
from asr_plugin.formats.nemo import import_nemo
from asr_plugin.training import train

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
LOADER = ["data.max_duration=10", "data.num_buckets=2", "data.num_workers=0", "data.prepare_num_workers=1"]
RUN = [  # the fine-tuning preset's warmup is a ratio of the run; from scratch it is a step count
    "trainer.max_steps=3",
    "test=false",
    "trainer.limit_val_batches=1",
    "trainer.enable_progress_bar=false",
    "callbacks.model_summary=null",
]


def _compose(config: str, overrides: list[str], tmp_path: Path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config, overrides=[*overrides, f"paths.root_dir={tmp_path}", f"paths.data_dir={tmp_path}/data"])


def _summary(out: Path) -> dict:
    return {(row["set"], row["method"]): row for row in json.loads((out / "wer-summary.json").read_text())["results"]}


@pytest.mark.slow
def test_fine_tune_a_nemo_checkpoint_on_a_nemo_manifest_evaluate_and_export(nemo_corpus, tmp_path):
    manifests, segments = nemo_corpus
    nemo_path, source = write_synthetic_nemo(tmp_path, "fast_conformer_transducer")
    data = [
        "data=nemo",
        f"data.train_manifests=[{manifests['train']}]",
        f"data.valid_manifests=[{manifests['dev']}]",
        *LOADER,
    ]
    cfg = _compose(
        "train",
        [
            "+finetune=from_nemo",
            f"finetune.path={nemo_path}",
            "finetune.pretrained_lr=1e-4",
            *data,
            *RUN,
            f"paths.output_dir={tmp_path}/run",
        ],
        tmp_path,
    )
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    checkpoint = result["last_model_path"]
    records = torch.load(checkpoint, map_location="cpu", weights_only=True)["asr_plugin"]
    assert records["tokenizer"]["convention"] == "nemo" and records["frontend"]["kind"] == "nemo"

    out = tmp_path / "eval"
    evaluation = _compose(
        "eval",
        [
            f"checkpoint={checkpoint}",
            "data=nemo",
            f"data.test_manifests={{mine: {manifests['test']}}}",
            "data.num_workers=0",
            f"output_dir={out}",
            "decoding.methods=[greedy]",
        ],
        tmp_path,
    )
    evaluate(evaluation)
    row = _summary(out)[("mine", "greedy")]
    assert row["utterances"] == len(segments["test"]) and row["ref_words"] > 0
    assert row["audio_seconds"] == pytest.approx(sum(s.duration for s in segments["test"]), rel=0.02)

    exported = export_nemo(checkpoint, tmp_path / "finetuned.nemo")
    imported = import_nemo(exported)
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    for key, value in imported.model.state_dict().items():
        torch.testing.assert_close(value, saved[f"model.{key}"])
    assert imported.model.vocab_size == source.vocab_size


@pytest.mark.slow
def test_train_from_scratch_on_lhotse_cuts_and_evaluate(cut_corpus, tmp_path):
    manifests, segments = cut_corpus
    cfg = _compose(
        "train",
        [
            "data=lhotse",
            f"data.train_cuts=[{manifests['train']}]",
            f"data.valid_cuts=[{manifests['dev']}]",
            "data.vocab_size=48",
            *LOADER,
            *MICRO_MODEL,
            *RUN,
            "optim.scheduler.warmup_steps=1",
            f"paths.output_dir={tmp_path}/run",
        ],
        tmp_path,
    )
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    out = tmp_path / "eval"
    evaluation = _compose(
        "eval",
        [
            f"checkpoint={result['last_model_path']}",
            "data=lhotse",
            f"data.test_cuts={{test: {manifests['test']}}}",
            "data.num_workers=0",
            f"output_dir={out}",
            "decoding.methods=[greedy]",
        ],
        tmp_path,
    )
    evaluate(evaluation)
    row = _summary(out)[("test", "greedy")]
    assert row["utterances"] == len(segments["test"]) and row["ref_words"] > 0


@pytest.mark.slow
def test_train_from_scratch_on_a_streamed_shar_directory(shar_corpus, tmp_path):
    shar, manifests, _ = shar_corpus
    cfg = _compose(
        "train",
        [
            "data=lhotse",
            f"data.train_shar={shar}",
            f"data.valid_cuts=[{manifests['dev']}]",
            "data.vocab_size=48",
            "data.frontend=null",  # global statistics, computed from the Shar
            *LOADER,
            "data.num_workers=2",  # the streamed loader's workers, each reading its own shards
            *MICRO_MODEL,
            *RUN,
            "optim.scheduler.warmup_steps=1",
            f"paths.output_dir={tmp_path}/run",
        ],
        tmp_path,
    )
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    records = torch.load(result["last_model_path"], map_location="cpu", weights_only=True)["asr_plugin"]
    assert records["frontend"]["kind"] == "logmel" and len(records["frontend"]["mean"]) == 80
