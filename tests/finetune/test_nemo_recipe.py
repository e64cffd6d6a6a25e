"""`+finetune=from_nemo` in the training recipe: NeMo's architecture, weights, tokenizer and front end, both loss
modes (tiny data, no NeMo needed); a new vocabulary only as an explicit opt-in."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from built_once import copy_of
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from nemo_models import write_synthetic_nemo
from tiny_models import TINY_CORPUS_SIZES

from asr_plugin.formats import export_nemo
from asr_plugin.formats.nemo import import_nemo
from asr_plugin.training import train

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
TINY_DATA = [
    *(f"data.mini_corpus.{key}={value}" for key, value in TINY_CORPUS_SIZES.items()),  # the session's tiny corpus
    "data.vocab_size=40",
    "data.max_duration=10",
    "data.num_buckets=2",
    "data.num_workers=0",
    "data.prepare_num_workers=1",
]
RUN = [
    "finetune.pretrained_lr=1e-4",
    "trainer.max_steps=3",
    "optim.scheduler.warmup_ratio=null",
    "optim.scheduler.warmup_steps=1",
    "test=false",
    "trainer.limit_val_batches=1",
    "trainer.enable_progress_bar=false",
    "callbacks.model_summary=null",
]


def _compose(overrides: list[str], tmp_path: Path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(
            "train", overrides=[*overrides, f"paths.root_dir={tmp_path}", f"paths.output_dir={tmp_path}/run"]
        )


@pytest.fixture(scope="module")
def data_dir(tiny_corpus, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data")
    copy_of(tiny_corpus, path / "mini_librispeech")  # the session's tiny corpus: nothing to synthesise
    instantiate(_compose([*TINY_DATA, f"paths.data_dir={path}"], path).data).prepare_data()
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_finetune_from_nemo_trains_in_both_loss_modes(data_dir, tmp_path, mode):
    nemo_path, source = write_synthetic_nemo(tmp_path, "fast_conformer_transducer")
    cfg = _compose(
        [
            *TINY_DATA,
            f"paths.data_dir={data_dir}",
            "+finetune=from_nemo",
            f"finetune.path={nemo_path}",
            "finetune.freeze_encoder_layers=1",
            f"+loss={mode}",
            *RUN,
        ],
        tmp_path,
    )
    assert cfg.model._target_ == "asr_plugin.formats.nemo.nemo_transducer" and cfg.loss.mode == mode
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    assert "val/wer" in result["start_metrics"]  # validated before the first step
    saved = torch.load(result["last_model_path"], map_location="cpu", weights_only=True)
    state, reference = saved["state_dict"], source.state_dict()
    frozen = "encoder.layers.0.self_attn.linear_q.weight"
    trained = "encoder.layers.1.self_attn.linear_q.weight"
    assert torch.equal(state[f"model.{frozen}"], reference[frozen])  # frozen block keeps NeMo's weights
    assert not torch.equal(state[f"model.{trained}"], reference[trained])  # the next block learns
    assert state["model.joint.output.weight"].shape == reference["joint.output.weight"].shape  # NeMo's vocabulary
    assert torch.all(state["model.predictor.embedding.weight"][0] == 0)  # NeMo's zero start embedding stays
    records = saved["asr_plugin"]
    assert records["tokenizer"]["convention"] == "nemo" and records["frontend"]["kind"] == "nemo"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_a_tdt_checkpoint_fine_tunes_with_its_own_loss(data_dir, tmp_path, mode):
    nemo_path, source = write_synthetic_nemo(tmp_path, "fast_conformer_tdt")
    cfg = _compose(
        [
            *TINY_DATA,
            f"paths.data_dir={data_dir}",
            "+finetune=from_nemo",
            f"finetune.path={nemo_path}",
            f"+loss={mode}",
            *RUN,
        ],
        tmp_path,
    )
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    saved = torch.load(result["last_model_path"], map_location="cpu", weights_only=True)
    loss, model = saved["hyper_parameters"]["loss"], saved["hyper_parameters"]["model"]
    # the .nemo's tdt_kwargs (benchmarks.nemo_examples: sigma 0.05, omega 0): the lattice in the model
    assert (loss["mode"], loss["omega"]) == (mode, 0.0) and "lattice" not in loss
    assert model["lattice"] == {"kind": "tdt", "durations": [0, 1, 2, 3, 4], "sigma": 0.05, "clamp": None}
    assert saved["state_dict"]["model.joint.output.weight"].shape == source.joint.output.weight.shape  # V + 5
    assert 0.0 <= result["start_metrics"]["val/wer"]  # TDT greedy validation before the first step


@pytest.mark.slow
def test_a_new_vocabulary_is_an_explicit_opt_in(data_dir, tmp_path, caplog):
    nemo_path, source = write_synthetic_nemo(tmp_path, "conformer_transducer")
    base = [
        *TINY_DATA,
        f"paths.data_dir={data_dir}",
        "+finetune=from_nemo",
        f"finetune.path={nemo_path}",
        *RUN,
        "data.tokenizer=null",
    ]  # the recipe's own SentencePiece model (40 ids) instead of NeMo's (41)
    with pytest.raises(
        ValueError, match="new_vocabulary=false but the checkpoint has 41 output tokens and the model 40"
    ):
        train(_compose(base, tmp_path))
    result = train(_compose([*base, "finetune.new_vocabulary=true"], tmp_path / "new"))
    assert "re-initialising predictor.embedding, joint.output" in caplog.text
    state = torch.load(result["last_model_path"], map_location="cpu", weights_only=True)["state_dict"]
    assert state["model.joint.output.weight"].shape[0] == 40
    key = "encoder.layers.1.conv.depthwise_conv.weight"
    assert state[f"model.{key}"].shape == source.state_dict()[key].shape


@pytest.mark.slow
def test_a_streaming_checkpoint_fine_tunes_keeping_its_lookaheads(data_dir, tmp_path):
    nemo_path, source = write_synthetic_nemo(tmp_path, "fast_conformer_streaming")
    cfg = _compose(
        [*TINY_DATA, f"paths.data_dir={data_dir}", "+finetune=from_nemo", f"finetune.path={nemo_path}", *RUN],
        tmp_path,
    )
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    saved = torch.load(result["last_model_path"], map_location="cpu", weights_only=True)
    model = saved["hyper_parameters"]["model"]  # the checkpoint's architecture: every lookahead, NeMo's first first
    assert model["att_context_size"] == [[16, 3], [16, 1], [16, 0]] and model["att_context_style"] == "chunked_limited"
    assert (model["conv_context_size"], model["conv_norm_type"], model["causal_downsampling"]) == (
        "causal",
        "layer_norm",
        True,
    )
    key = "encoder.layers.1.self_attn.linear_q.weight"
    assert not torch.equal(saved["state_dict"][f"model.{key}"], source.state_dict()[key])  # it trained
    # back to NeMo with its lookaheads
    exported = import_nemo(export_nemo(result["last_model_path"], tmp_path / "finetuned.nemo"))
    assert exported.config["encoder"]["att_context_size"] == [[16, 3], [16, 1], [16, 0]]
    assert exported.model.encoder.att_context_sizes == [(16, 3), (16, 1), (16, 0)]
