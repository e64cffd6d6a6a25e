"""A model trained from scratch with any data config's defaults is trained on the features sherpa-onnx computes, so
it deploys there without a feature adapter; a model fine-tuned from a .nemo keeps the .nemo's front end."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from train_configs import compose_train

from asr_plugin.export.feature_adapter import SherpaFeatures, encoder_input
from asr_plugin.frontend.spec import complete_frontend_spec


@pytest.mark.parametrize("data", ["mini", "librispeech", "nemo", "lhotse"])
def test_training_from_scratch_uses_sherpa_onnx_features_by_default(data, tmp_path):
    cfg = compose_train([f"data={data}"], tmp_path)
    assert cfg.data.frontend == "sherpa"
    spec = complete_frontend_spec({"kind": cfg.data.frontend})
    assert spec["options"]["num_mel_bins"] == cfg.data.num_mel_bins == 80
    assert isinstance(encoder_input(spec), SherpaFeatures)  # the ONNX export needs no feature adapter


def test_fine_tuning_from_a_nemo_file_keeps_its_front_end(tmp_path):
    cfg = compose_train(["data=nemo", "+finetune=from_nemo", "finetune.path=/x/model.nemo"], tmp_path)
    assert OmegaConf.to_container(cfg.data.frontend, resolve=True) == {
        "_target_": "asr_plugin.formats.nemo.nemo_frontend_spec",
        "path": "/x/model.nemo",
    }
