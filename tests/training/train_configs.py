"""Helpers of the training tests: composing conf/train.yaml and tiny module and run configs.

A module of its own (not conftest.py) so that test files can import it by a name no other test directory
uses: `pytest tests/training tests/data` collects both directories' conftest modules."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from types import SimpleNamespace

import lightning as L
from built_once import copy_of
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tiny_models import MICRO_MODEL, TINY_CORPUS_SIZES

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
# What a job's launcher sets (SLURM, torchrun, Lightning) and this project's run id.
JOB_VARIABLES = ("ASR_RUN_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "WORLD_SIZE", "NODE_RANK", "RANK", "LOCAL_RANK")


def compose_train(overrides: list[str] = (), tmp_path: Path | None = None, with_hydra: bool = False) -> DictConfig:
    """conf/train.yaml composed as the recipe would, with run paths under `tmp_path` (no Hydra runtime; its
    ``hydra`` node too `with_hydra`)."""
    paths = []
    if tmp_path is not None:
        paths = [f"paths.root_dir={tmp_path}", f"paths.output_dir={tmp_path}/run"]  # log_dir: root_dir/logs
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides) + paths, return_hydra_config=with_hydra)


def job_free_env(**extra: str) -> dict[str, str]:
    """The environment of a recipe process a test starts: this one's without any job's variables (SLURM's,
    torchrun's, ASR_RUN_ID: the test's own job and run directory), one thread, this checkout first on
    PYTHONPATH; `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k not in JOB_VARIABLES}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return {**env, **extra}


def quiet_cpu_trainer(**kwargs) -> L.Trainer:
    """A Lightning Trainer on one CPU device with no logger, checkpoints, progress bar, model summary or sanity
    validation; `kwargs` add to or replace those."""
    quiet = dict(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    return L.Trainer(**{**quiet, **kwargs})


def micro_module_kwargs(mode: str = "batched", dropout: float = 0.0, vocab_size: int = 12, **optim) -> dict:
    """TransducerModule kwargs from conf/ files: the micro model (no dropout), the loss node of
    train.yaml in `mode`, conf/optim/noam.yaml (with `optim` overriding optimizer keys), no SpecAugment."""
    model = OmegaConf.merge(
        OmegaConf.load(CONF_DIR / "model" / "tiny.yaml"),
        OmegaConf.from_dotlist([o.removeprefix("model.") for o in MICRO_MODEL]),
        {"vocab_size": vocab_size, "dropout": dropout, "predictor_dropout": dropout},
    )
    loss = OmegaConf.merge(OmegaConf.load(CONF_DIR / "train.yaml").loss, {"mode": mode})
    optim = OmegaConf.merge(OmegaConf.load(CONF_DIR / "optim" / "noam.yaml"), {"optimizer": optim})
    return {
        "model": OmegaConf.to_container(model),
        "loss": OmegaConf.to_container(loss),
        "optim": OmegaConf.to_container(optim),
        "spec_augment": None,
    }


# The data helper's test-sized mini corpus and loader settings (tests/data/conftest.py uses the same).
TINY_DATA = [
    *(f"data.mini_corpus.{key}={value}" for key, value in TINY_CORPUS_SIZES.items()),
    "data.vocab_size=48",
    "data.max_duration=10",
    "data.num_buckets=3",
    "data.num_workers=0",
    "data.prepare_num_workers=1",
]


def prepare_tiny_data(corpus: Path, data_dir: Path) -> Path:
    """`data_dir` as conf/train.yaml's paths.data_dir with TINY_DATA: a copy of the tiny `corpus` (so nothing
    is synthesised), its manifests, tokenizer and feature stats."""
    copy_of(corpus, data_dir / "mini_librispeech")
    instantiate(compose_train(TINY_DATA + [f"paths.data_dir={data_dir}"]).data).prepare_data()
    return data_dir


# A few seconds of training: micro model, short runs, no progress bar or model summary.
TINY_RUN = (
    MICRO_MODEL
    + TINY_DATA
    + [
        "trainer.limit_val_batches=1",
        "trainer.log_every_n_steps=1",
        "trainer.enable_progress_bar=false",
        "callbacks.model_summary=null",
        "test=false",
    ]
)


class StubTrainer:
    """What the step-boundary signal callbacks (`asr_plugin.training.slurm_requeue`, `.signal_stop`) read of a
    Trainer: one process, rank 1 (so no `scontrol`), 2 batches a step, no launcher; records the checkpoints."""

    world_size, accumulate_grad_batches, is_global_zero, global_step = 1, 2, False, 7
    strategy = SimpleNamespace(launcher=None)

    def __init__(self, root):
        self.default_root_dir, self.saved = str(root), []

    def save_checkpoint(self, path):
        self.saved.append(Path(path).name)


def train_steps(metrics: Path) -> list[int]:
    """The steps of the training-loss rows of a run's ``metrics.csv`` ([] before it exists)."""
    if not metrics.exists():
        return []
    with metrics.open() as handle:
        return [int(row["step"]) for row in csv.DictReader(handle) if row.get("train/loss_step")]
