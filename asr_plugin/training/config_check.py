"""What ``train(cfg)`` checks before anything runs: every node against its target, the schedule against the
corpus, the seed."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from asr_plugin.config_nodes import TARGET, ConfigError, check_arguments, check_config_node
from asr_plugin.formats import architecture_format
from asr_plugin.training.finetune_settings import INHERITED
from asr_plugin.training.lightning_module import NODE_TARGETS, TransducerModule
from asr_plugin.training.schedulers import check_schedule_fits_corpus


def check_config(cfg: DictConfig) -> None:
    """Checks every node that will be built against its target's signature and annotations, before anything
    runs: a wrong-type value (``trainer.max_steps=abc``, ``optim.optimizer.lr=fast``) or an unknown argument
    is a ConfigError naming its key, not an error deep inside Lightning or torch after data preparation; then
    the schedule against the corpus (`check_schedule_fits_corpus`)."""
    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    model = plain["model"]
    architecture_format(model)  # build_transducer's arguments, or the architecture of a model file
    check_config_node(model, "model")
    for key, allowed in NODE_TARGETS.items():  # what the module builds (and its checkpoints store)
        group, _, child = key.partition(".")
        node = plain[group][child] if child else plain.get(group)
        if node:
            check_config_node(node, key)
            allowed.resolve(node[TARGET], key)
    check_config_node(plain["data"], "data")
    check_config_node(plain["trainer"], "trainer", supplied=("callbacks", "logger", "plugins"))
    for group in ("callbacks", "logger"):
        for name, node in (plain.get(group) or {}).items():
            if node is not None:
                check_config_node(node, f"{group}.{name}")
    options = {k: plain[k] for k in INHERITED if plain.get(k) is not None}  # null: the checkpoint's
    check_arguments(TransducerModule, options, "", partial=True)
    check_schedule_fits_corpus(cfg)


def checked_seed(value: Any) -> int:
    """``seed`` as the integer Lightning seeds with; ConfigError naming the key for anything else."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise ConfigError(f"seed={value!r} must be an integer in [0, 2**32) (or null: no seeding)")
    return value


def validates_first(cfg: DictConfig, resuming: bool) -> bool:
    """``validate_first``: true or false, or null (the default) for "when fine-tuning a pretrained model";
    a resumed run is past its start, so null never validates it again."""
    value = cfg.get("validate_first")
    if value is None:
        return bool(cfg.get("finetune")) and not resuming
    if not isinstance(value, bool):
        raise ConfigError(f"validate_first={value!r} must be true, false or null")
    return value
