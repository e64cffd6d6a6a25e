"""Every config group and experiment composes, and the loss mode switches as users type it."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from train_configs import CONF_DIR, compose_train

GROUP_OPTIONS = [
    (group, path.stem)
    for group in ("data", "model", "trainer", "optim", "callbacks", "logger", "paths", "hydra")
    for path in sorted((CONF_DIR / group).glob("*.yaml"))
]
EXPERIMENTS = sorted(path.stem for path in (CONF_DIR / "experiment").glob("*.yaml"))


def test_defaults_are_the_cpu_demo(tmp_path):
    cfg = compose_train(tmp_path=tmp_path)
    assert cfg.data.corpus == "mini" and cfg.model.d_model == 144 and cfg.trainer.accelerator == "cpu"
    assert cfg.loss.mode == "batched" and cfg.loss.memory_budget is None
    assert cfg.paths.data_dir == f"{tmp_path}/data" and cfg.data.root == f"{tmp_path}/data/mini_librispeech"
    assert OmegaConf.is_missing(cfg.model, "vocab_size")  # filled by train(cfg) from the tokenizer


def assert_holds(written, composed, where: str) -> None:
    """Every key of an option file's node (`written`) is in the composed node: its plain values and lists equal,
    what the file leaves mandatory (???) still missing, interpolations there, nested nodes key by key."""
    for key in written:
        if key == "defaults":
            continue
        if OmegaConf.is_missing(written, key):
            assert OmegaConf.is_missing(composed, key), f"{where}.{key}"
        elif OmegaConf.is_interpolation(written, key):
            assert key in composed, f"{where}.{key}"
        elif OmegaConf.is_list(written[key]):
            assert OmegaConf.to_container(composed[key]) == OmegaConf.to_container(written[key]), f"{where}.{key}"
        elif OmegaConf.is_config(written[key]):
            assert_holds(written[key], composed[key], f"{where}.{key}")
        else:
            assert composed[key] == written[key], f"{where}.{key}"


@pytest.mark.parametrize(("group", "option"), GROUP_OPTIONS)
def test_every_group_option_composes(group, option, tmp_path):
    """Choosing an option puts its file's values in the group, and every interpolation of the group resolves
    (the run-time ones of ``hydra`` and ``paths`` aside)."""
    cfg = compose_train([f"{group}={option}"], tmp_path=tmp_path, with_hydra=group == "hydra")
    assert_holds(OmegaConf.load(CONF_DIR / group / f"{option}.yaml"), cfg[group], group)
    resolved = OmegaConf.to_container(cfg[group], resolve=group not in ("hydra", "paths"))
    assert isinstance(resolved, dict)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes(experiment, tmp_path):
    cfg = compose_train([f"experiment={experiment}"], tmp_path=tmp_path)
    assert cfg.task_name == experiment
    OmegaConf.to_container(cfg, resolve=True)


def test_large_experiment_builds_on_medium(tmp_path):
    cfg = compose_train(["experiment=librispeech_large"], tmp_path=tmp_path)
    assert (cfg.model.d_model, cfg.model.num_layers, cfg.model.joint_dim) == (512, 17, 640)
    assert cfg.data.corpus == "librispeech" and cfg.trainer.strategy == "ddp" and cfg.loss.mode == "samplewise"
    assert cfg.optim.scheduler.warmup_steps == 9000 and cfg.optim.scheduler.min_lr_ratio == 0.05


@pytest.mark.parametrize(
    ("name", "dims"),
    [("small", (176, 16, 4, 704, 320)), ("medium", (256, 16, 4, 1024, 640)), ("large", (512, 17, 8, 2048, 640))],
)
def test_presets_have_nemo_conformer_transducer_dims(name, dims):
    cfg = OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml")
    assert (cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.ffn_dim, cfg.predictor_dim) == dims
    assert cfg.joint_dim == cfg.predictor_dim and cfg.conv_kernel_size == 31 and cfg.subsampling_factor == 4


@pytest.mark.parametrize("mode", ["batched", "samplewise"])
def test_appended_loss_group_overrides_the_default_node(mode, tmp_path):
    cfg = compose_train([f"+loss={mode}", "loss.memory_budget=256MiB"], tmp_path=tmp_path)
    assert cfg.loss.mode == mode and cfg.loss.memory_budget == "256MiB"
    loss = instantiate(cfg.loss)
    assert loss.mode == mode and loss.memory_budget == 256 * 2**20


def test_schedulers_and_trainer_instantiate(tmp_path):
    import torch

    for optim in ("noam", "cosine"):
        cfg = compose_train([f"optim={optim}"], tmp_path=tmp_path)
        optimizer = instantiate(cfg.optim.optimizer)([torch.nn.Parameter(torch.zeros(1))])
        scheduler = instantiate(cfg.optim.scheduler)(optimizer, total_steps=1000)
        assert scheduler.get_last_lr()[0] > 0
    trainer = instantiate(compose_train(["logger=csv"], tmp_path=tmp_path).trainer, logger=False)
    assert trainer.gradient_clip_val == 5.0


def test_optuna_search_composes_when_the_sweeper_is_installed(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="train",
            overrides=["hparams_search=mini_optuna", f"paths.root_dir={tmp_path}"],
            return_hydra_config=True,
        )
    assert cfg.hydra.sweeper.direction == "minimize" and "optim.optimizer.lr" in cfg.hydra.sweeper.params
