"""Wrong config values fail where they enter, naming the key, before data preparation or training starts."""

from __future__ import annotations

import pytest

from asr_plugin.config_nodes import ConfigError
from asr_plugin.training import train


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.max_steps=abc", r"trainer\.max_steps='abc': lightning\.pytorch\.Trainer expects int, got str"),
        (
            "optim.optimizer.lr=fast",
            r"optim\.optimizer\.lr='fast': torch\.optim\.AdamW expects float \| torch\.Tensor, got str",
        ),
        ("optim.scheduler.warmup_steps=1.5", r"optim\.scheduler\.warmup_steps=1\.5"),
        ("loss.memory_budget=[1]", r"loss\.memory_budget=\[1\]"),
        ("data.max_duration=long", r"data\.max_duration='long'"),
        ("model.d_model=wide", r"model\.d_model='wide'"),
        (
            "callbacks.step_checkpoint.every_n_train_steps=often",
            r"callbacks\.step_checkpoint\.every_n_train_steps='often'",
        ),
        ("ctc_weight=high", r"ctc_weight='high': .*TransducerModule expects float"),
        ("+trainer.max_stepz=5", r"trainer: lightning\.pytorch\.Trainer has no argument\(s\) \['max_stepz'\]"),
        (
            "optim.optimizer._target_=torch.load",
            r"optim\.optimizer\._target_=.torch\.load. is refused.*torch\.optim\.<Optimizer>",
        ),
    ],
)
def test_wrong_values_are_refused_before_anything_runs(tiny_run, tmp_path, override, message):
    cfg = tiny_run([override])
    cfg.paths.data_dir = cfg.data.root = cfg.data.work_dir = str(tmp_path / "never-created")
    with pytest.raises(ConfigError, match=message):
        train(cfg)
    assert not (tmp_path / "never-created").exists()


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["experiment=librispeech_medium"],
        ["experiment=librispeech_large"],
        ["experiment=mini_tiny"],
        ["+finetune=from_nemo", "finetune.path=/x.nemo"],
        ["+finetune=from_checkpoint", "finetune.path=/x.ckpt"],
        ["trainer=ddp"],
        ["logger=many"],
        ["callbacks=none"],
        ["optim=noam"],
        ["+loss=samplewise"],
        ["model=large"],
    ],
)
def test_every_shipped_composition_passes_the_checks(tmp_path, overrides):
    """The composition passes, and the check reads each node it will build: the same composition with any one
    of them naming a callable that does not take its arguments is refused, naming the node."""
    from omegaconf import OmegaConf, open_dict
    from train_configs import compose_train

    from asr_plugin.training.config_check import check_config

    cfg = compose_train(overrides, tmp_path=tmp_path)
    check_config(cfg)  # raises ConfigError naming what is wrong
    for node in ("model", "loss", "optim.optimizer", "optim.scheduler", "trainer", "data"):
        broken = cfg.copy()
        with open_dict(broken):
            OmegaConf.update(broken, f"{node}._target_", "builtins.len")
        with pytest.raises(ConfigError, match=rf"^{node}(\._target_='builtins.len'|: builtins.len has no argument)"):
            check_config(broken)
