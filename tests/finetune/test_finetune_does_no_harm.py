"""`+finetune=from_nemo` with no optimiser overrides improves a trained checkpoint: a NeMo-layout model that these
tests train (the recipe from a random `.nemo`, to a plateau, exported with `export_nemo`) gets a lower dev loss
after a dozen steps of the preset, where the from-scratch demo's optimiser (lr 3e-3 after a warmup cut to the
run's first tenth, the preset's default before it had one) raises it: a trained model needs a fine-tuning lr from
the first step (docs/finetune.md, "With the presets")"""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from nemo_models import write_synthetic_nemo

from asr_plugin.formats import export_nemo
from asr_plugin.training import train

pytestmark = pytest.mark.slow  # the pretraining: a few minutes on one CPU core, once per module

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
# enough utterances that the pretrained model generalises to dev's unseen voices before it overfits
DATA = [
    "data.mini_corpus.n_train=200",
    "data.mini_corpus.n_dev=8",
    "data.mini_corpus.n_test=4",
    "data.mini_corpus.train_engines=[espeak,piper]",  # the corpus this check was calibrated on
    "data.max_duration=10",
    "data.num_buckets=2",
    "data.num_workers=0",
    "data.prepare_num_workers=1",
]
QUIET = [
    "test=false",
    "trainer.enable_progress_bar=false",
    "callbacks.model_summary=null",
    "trainer.check_val_every_n_epoch=null",
]
PRETRAIN_STEPS = 1000
FINETUNE_STEPS = 12


def _train(overrides: list[str], data_dir: Path, out: Path) -> dict:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                *DATA,
                *QUIET,
                f"paths.data_dir={data_dir}",
                *overrides,
                f"paths.root_dir={out}",
                f"paths.output_dir={out}/run",
            ],
        )
    return train(cfg)


@pytest.fixture(scope="module")
def trained_nemo(tmp_path_factory) -> tuple[Path, Path]:
    """(a .nemo of a model trained to a plateau on the mini corpus, the corpus' data directory)."""
    root = tmp_path_factory.mktemp("pretrained")
    random_init, _ = write_synthetic_nemo(root, "conformer_transducer")
    # a from-scratch schedule: the checkpoint's own training, not what the test checks
    scratch = [
        "optim.optimizer.lr=5e-3",
        "optim.scheduler.warmup_ratio=null",
        "optim.scheduler.warmup_steps=20",
        "optim.scheduler.min_lr_ratio=0.01",
        "finetune.augmentation=config",
        "validate_first=false",
        f"trainer.max_steps={PRETRAIN_STEPS}",
        f"trainer.val_check_interval={PRETRAIN_STEPS}",
    ]
    result = _train(["+finetune=from_nemo", f"finetune.path={random_init}", *scratch], root / "data", root / "scratch")
    return export_nemo(result["last_model_path"], root / "trained.nemo"), root / "data"


def test_from_nemo_with_no_optimiser_overrides_lowers_the_dev_loss(trained_nemo, tmp_path):
    path, data_dir = trained_nemo
    result = _train(
        [
            "+finetune=from_nemo",
            f"finetune.path={path}",
            f"trainer.max_steps={FINETUNE_STEPS}",
            f"trainer.val_check_interval={FINETUNE_STEPS}",
        ],
        data_dir,
        tmp_path,
    )
    start, end = result["start_metrics"]["val/loss"], result["metrics"]["val/loss"]
    assert result["global_step"] == FINETUNE_STEPS
    assert end < start, f"the preset raised the dev loss from {start:.3f} to {end:.3f}"


def test_the_from_scratch_optimiser_raises_that_dev_loss(trained_nemo, tmp_path):
    """What `+finetune=from_nemo` used before its preset (conf/optim/cosine.yaml's lr and warmup, the recipe's
    SpecAugment): the check above tells the two apart."""
    path, data_dir = trained_nemo
    scratch = [
        "optim.optimizer.lr=3e-3",
        "optim.scheduler.warmup_ratio=null",
        "optim.scheduler.warmup_steps=200",
        "optim.scheduler.min_lr_ratio=0.01",
        "finetune.augmentation=config",
    ]
    result = _train(
        [
            "+finetune=from_nemo",
            f"finetune.path={path}",
            f"trainer.max_steps={FINETUNE_STEPS}",
            f"trainer.val_check_interval={FINETUNE_STEPS}",
            *scratch,
        ],
        data_dir,
        tmp_path,
    )
    assert result["metrics"]["val/loss"] > result["start_metrics"]["val/loss"]
