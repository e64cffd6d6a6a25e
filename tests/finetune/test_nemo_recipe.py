"""`+finetune=from_nemo` in the training recipe: NeMo's architecture and weights, both loss modes (tiny data)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from nemo_models import write_synthetic_nemo

from asr_plugin.training import train

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
TINY_DATA = [
    "data.mini_corpus.n_train=16", "data.mini_corpus.n_dev=4", "data.mini_corpus.n_test=4", "data.vocab_size=40",
    "data.max_duration=10", "data.num_buckets=2", "data.num_workers=0", "data.prepare_num_workers=1",
]


def _compose(overrides: list[str], tmp_path: Path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*overrides, f"paths.root_dir={tmp_path}", f"paths.output_dir={tmp_path}/run"])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data")
    instantiate(_compose([*TINY_DATA, f"paths.data_dir={path}"], path).data).prepare_data()
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_finetune_from_nemo_trains_in_both_loss_modes(data_dir, tmp_path, mode):
    nemo_path, source = write_synthetic_nemo(tmp_path, "fast_conformer_transducer")
    cfg = _compose([
        *TINY_DATA, f"paths.data_dir={data_dir}", "+finetune=from_nemo", f"finetune.path={nemo_path}",
        "finetune.pretrained_lr=1e-4", "finetune.freeze_encoder_layers=1", f"+loss={mode}", "trainer.max_steps=3",
        "optim.scheduler.warmup_steps=1", "test=false", "trainer.limit_val_batches=1",
        "trainer.enable_progress_bar=false", "callbacks.model_summary=null",
    ], tmp_path)
    assert cfg.model._target_ == "asr_plugin.finetune.nemo.nemo_transducer" and cfg.loss.mode == mode
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    state = torch.load(result["last_model_path"], map_location="cpu", weights_only=False)["state_dict"]
    reference = source.state_dict()
    frozen = "encoder.layers.0.self_attn.linear_q.weight"
    trained = "encoder.layers.1.self_attn.linear_q.weight"
    assert torch.equal(state[f"model.{frozen}"], reference[frozen])  # frozen block keeps NeMo's weights
    assert not torch.equal(state[f"model.{trained}"], reference[trained])  # the next block learns
    assert state["model.joint.output.weight"].shape[0] == 40  # the recipe's tokenizer, not NeMo's
