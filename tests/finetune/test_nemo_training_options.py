"""What a `.nemo`'s config says about its training and decoding (reduction, CTC weight and reduction, greedy
max_symbols, SpecAugment), as the fine-tuning presets take it, and `export_nemo` writing it back (no NeMo needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from nemo_models import write_synthetic_nemo
from omegaconf import OmegaConf

from asr_plugin.formats import export_nemo
from asr_plugin.formats.nemo import import_nemo, nemo_training_options, read_nemo_training_options
from asr_plugin.training.finetune_settings import describe_settings, module_settings
from asr_plugin.training.lightning_module import SPEC_AUGMENT_TARGETS

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
NEMO_SPEC_AUGMENT = {
    "_target_": "nemo.collections.asr.modules.SpectrogramAugmentation",
    "freq_masks": 2,
    "time_masks": 10,
    "freq_width": 27,
    "time_width": 0.05,
}


def test_a_plain_config_gets_nemos_defaults_and_a_hybrid_its_aux_ctc():
    assert nemo_training_options({}) == {
        "loss_reduction": "mean_batch",
        "ctc_weight": 0.0,
        "ctc_reduction": "mean_batch",
        "max_symbols_per_frame": 10,
        "spec_augment": None,
    }
    hybrid = {
        "rnnt_reduction": "mean_volume",
        "decoding": {"greedy": {"max_symbols": 7}},
        "aux_ctc": {"ctc_loss_weight": 0.3, "ctc_reduction": "mean_volume"},
    }
    assert nemo_training_options(hybrid) == {
        "loss_reduction": "mean_volume",
        "ctc_weight": 0.3,
        "ctc_reduction": "mean_volume",
        "max_symbols_per_frame": 7,
        "spec_augment": None,
    }
    assert nemo_training_options({"aux_ctc": {"decoder": {}}})["ctc_weight"] == 0.5  # NeMo's hybrid default


def test_spec_augment_maps_onto_ours_as_a_ratio_or_frames():
    ours = nemo_training_options({"spec_augment": NEMO_SPEC_AUGMENT})["spec_augment"]
    assert ours == {
        "_target_": "asr_plugin.data.SpecAugment",
        "num_freq_masks": 2,
        "freq_mask_width": 27,
        "num_time_masks": 10,
        "time_mask_width": None,
        "max_time_mask_ratio": 0.05,
    }
    module = SPEC_AUGMENT_TARGETS.build(ours, "spec_augment")  # a node the training module builds
    assert (module.num_time_masks, module.max_time_mask_ratio) == (10, 0.05)
    frames = nemo_training_options({"spec_augment": {**NEMO_SPEC_AUGMENT, "time_width": 25}})["spec_augment"]
    assert (frames["time_mask_width"], frames["max_time_mask_ratio"]) == (25, 1.0)
    assert (
        nemo_training_options({"spec_augment": {**NEMO_SPEC_AUGMENT, "freq_masks": 0, "time_masks": 0}})["spec_augment"]
        is None
    )
    with pytest.raises(ValueError, match=r"spec_augment.rect_masks=5 is not supported \(finetune.augmentation=config"):
        nemo_training_options({"spec_augment": {**NEMO_SPEC_AUGMENT, "rect_masks": 5}})
    with pytest.raises(ValueError, match="spec_augment.mask_pattern is not supported"):
        nemo_training_options({"spec_augment": {**NEMO_SPEC_AUGMENT, "mask_pattern": "x"}})


def compose_train(overrides: list[str], tmp_path: Path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*overrides, f"paths.root_dir={tmp_path}"])


def _with_training_section(config):
    config.update(rnnt_reduction="mean_volume", spec_augment=NEMO_SPEC_AUGMENT)
    config["decoding"]["greedy"]["max_symbols"] = 6


def test_the_presets_take_the_nemo_settings_and_say_so(tmp_path):
    path, _ = write_synthetic_nemo(tmp_path, "fast_conformer_transducer", config_edit=_with_training_section)
    cfg = compose_train(["+finetune=from_nemo", f"finetune.path={path}"], tmp_path=tmp_path)
    settings, origins = module_settings(cfg)
    assert settings == {
        "max_symbols_per_frame": 6,
        "loss_reduction": "mean_volume",
        "ctc_reduction": "mean_batch",
        "ctc_weight": 0.0,
        "spec_augment": read_nemo_training_options(path)["spec_augment"],
    }
    assert set(origins.values()) == {"checkpoint"}
    lines = describe_settings(cfg, settings, origins)
    assert lines[0].startswith("optimizer: torch.optim.AdamW (lr=0.0001,")
    assert "warmup_ratio=0.1" in lines[1] and "min_lr_ratio=0.05" in lines[1]
    assert "loss_reduction: mean_volume (checkpoint)" in lines and "max_symbols_per_frame: 6 (checkpoint)" in lines
    overridden = compose_train(
        [
            "+finetune=from_nemo",
            f"finetune.path={path}",
            "max_symbols_per_frame=2",
            "finetune.augmentation=config",
            "spec_augment=null",
        ],
        tmp_path=tmp_path,
    )
    settings, origins = module_settings(overridden)
    assert (settings["max_symbols_per_frame"], origins["max_symbols_per_frame"]) == (2, "config")
    assert settings["spec_augment"] is None and origins["spec_augment"] == "config"
    bad = compose_train(
        ["+finetune=from_nemo", f"finetune.path={path}", "finetune.augmentation=nemo"], tmp_path=tmp_path
    )
    with pytest.raises(ValueError, match="finetune.augmentation='nemo': choose one of"):
        module_settings(bad)


def test_export_writes_the_settings_back(tmp_path):
    path, _ = write_synthetic_nemo(tmp_path, "conformer_transducer", config_edit=_with_training_section)
    again = import_nemo(export_nemo(import_nemo(path), tmp_path / "again.nemo"))
    assert nemo_training_options(again.config) == read_nemo_training_options(path)
    assert OmegaConf.create(again.config).spec_augment.time_width == 0.05


# a training section holding an interpolation (`value`), and the key it stands under
INTERPOLATED = {
    "spec_augment.freq_masks": lambda value: {"spec_augment": {**NEMO_SPEC_AUGMENT, "freq_masks": value}},
    "aux_ctc.ctc_loss_weight": lambda value: {"aux_ctc": {"ctc_loss_weight": value}},
    "rnnt_reduction": lambda value: {"rnnt_reduction": value},
}


@pytest.mark.parametrize("key", INTERPOLATED)
def test_an_interpolation_in_a_training_section_is_refused_naming_the_file_and_the_key(tmp_path, key):
    target = tmp_path / "made_by_the_file"
    sections = INTERPOLATED[key](f"${{run_id:{target}}}")
    path, _ = write_synthetic_nemo(tmp_path, "conformer_transducer", config_edit=lambda config: config.update(sections))
    named = rf"{path}: model_config\.yaml: {key}='\$\{{run_id:.*' looks like an interpolation"
    with pytest.raises(ValueError, match=named):
        read_nemo_training_options(path)
    cfg = compose_train(["+finetune=from_nemo", f"finetune.path={path}"], tmp_path=tmp_path)
    with pytest.raises(ValueError, match=named):
        module_settings(cfg)  # what train(cfg) logs first
    assert not target.exists()
