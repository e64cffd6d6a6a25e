"""asr_plugin.config_nodes: nodes from files build only allow-listed targets; every node's arguments are checked
against its target's signature, the key named."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Literal

import pytest
import torch

from asr_plugin.config_nodes import AllowList, ConfigError, check_arguments, check_config_node, matches


def scale(x: float, factor: int = 2, mode: Literal["a", "b"] = "a", sizes: Sequence[int] | None = None) -> float:
    return x * factor


class Box:
    def __init__(self, inner: object, path: str | os.PathLike = ".", pair: tuple[float, float] = (0.0, 1.0)) -> None:
        self.inner, self.path, self.pair = inner, path, pair


ALLOWED = AllowList({"tests.scale": scale, "tests.Box": Box})


@pytest.mark.parametrize(
    ("value", "annotation", "expected"),
    [
        (3, float, True),
        (3.5, int, False),
        (True, int, False),
        (True, float, False),
        ("abc", int, False),
        (None, int | None, True),
        ("fast", float | torch.Tensor, False),
        ([0.9, 0.98], tuple[float, float], True),
        ([0.9], tuple[float, float], False),
        ("x", Sequence[int], False),
        ([1, "2"], list[int], False),
        ({"a": 1}, dict[str, int], True),
        ("32-true", Literal["32-true", "bf16-mixed"], True),
        (32, Literal["32", "16"], False),
        ("out/dir", os.PathLike, True),
    ],
)
def test_matches_follows_config_conventions(value, annotation, expected):
    assert matches(value, annotation) is expected


def test_allowed_nodes_build_nested_and_partial():
    box = ALLOWED.build({"_target_": "tests.Box", "inner": {"_target_": "tests.scale", "x": 1.5}, "pair": [1, 2]}, "m")
    assert box.inner == 3.0 and box.pair == [1, 2]
    partial = ALLOWED.build({"_target_": "tests.scale", "_partial_": True, "factor": 3}, "m")
    assert isinstance(partial, functools.partial) and partial(2.0) == 6.0
    # the defining module's name is the same target
    assert ALLOWED.build({"_target_": f"{__name__}.scale", "x": 1}, "m") == 2


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"_target_": "torch.load", "f": "x.pt"}, r"model\._target_='torch\.load' is refused.*tests\.Box"),
        (
            {"_target_": "tests.Box", "inner": {"_target_": "builtins.open", "file": "/etc/passwd"}},
            r"model\.inner\._target_='builtins\.open' is refused",
        ),
        (
            {"_target_": "tests.Box", "inner": [{"_target_": "shutil.copyfile", "src": "a", "dst": "b"}]},
            r"model\.inner\[0\]\._target_='shutil\.copyfile' is refused",
        ),
        ({"_target_": "tests.scale", "x": b"bytes"}, r"model\.x: a bytes where a config holds plain values"),
        ({"_target_": "tests.scale", "x": "fast"}, r"model\.x='fast': tests\.scale expects float, got str"),
        ({"_target_": "tests.scale", "x": 1, "mode": "c"}, r"model\.mode='c'"),
        ({"_target_": "tests.scale", "x": 1, "speed": 2}, r"model: .*scale has no argument\(s\) \['speed'\]"),
        ({"_target_": "tests.scale"}, r"needs \['x'\]: set model\.x"),
        ({"_target_": "tests.scale", "_args_": [1]}, r"\['_args_'\] are not supported"),
        ({"x": 1}, r"model: no _target_"),
    ],
)
def test_refusals_name_the_key(node, message):
    with pytest.raises(ConfigError, match=message):
        ALLOWED.build(node, "model")


def test_optimizers_are_torch_optim_subclasses_only():
    optimizers = AllowList({}, optimizers=True)
    factory = optimizers.build(
        {"_target_": "torch.optim.AdamW", "_partial_": True, "lr": 1e-3, "betas": [0.9, 0.98]}, "optim.optimizer"
    )
    assert isinstance(factory([torch.nn.Parameter(torch.zeros(1))]), torch.optim.AdamW)
    for name in (
        "torch.optim.lr_scheduler.LambdaLR",
        "torch.optim.Optimizer.zero_grad",
        "torch.load",
        "torch.optim.swa_utils",
    ):
        with pytest.raises(ConfigError, match="is refused"):
            optimizers.build({"_target_": name, "_partial_": True}, "optim.optimizer")
    with pytest.raises(ConfigError, match=r"optim\.optimizer\.lr='fast'"):
        optimizers.build({"_target_": "torch.optim.AdamW", "_partial_": True, "lr": "fast"}, "optim.optimizer")


def test_user_config_nodes_are_checked_with_their_real_target():
    trainer = {"_target_": "lightning.pytorch.Trainer", "max_steps": "abc", "devices": 1}
    with pytest.raises(ConfigError, match=r"trainer\.max_steps='abc': .*Trainer expects int, got str"):
        check_config_node(trainer, "trainer", supplied=("callbacks",))
    check_config_node({**trainer, "max_steps": 10, "precision": "bf16-mixed"}, "trainer")
    with pytest.raises(ConfigError, match=r"trainer\.precision='bf17'"):
        check_config_node({**trainer, "max_steps": 10, "precision": "bf17"}, "trainer")
    with pytest.raises(ConfigError, match=r"callbacks\.x\._target_='nowhere\.Nothing' cannot be found"):
        check_config_node({"_target_": "nowhere.Nothing"}, "callbacks.x")
    # "???" (a mandatory value filled in later) is not checked, and not missing
    check_config_node({"_target_": "asr_plugin.models.build_transducer", "vocab_size": "???"}, "model")
    with pytest.raises(ConfigError, match=r"model\.d_model=1\.5"):
        check_config_node(
            {"_target_": "asr_plugin.models.build_transducer", "vocab_size": "???", "d_model": 1.5}, "model"
        )


def test_check_arguments_allows_what_the_caller_supplies():
    check_arguments(Box, {}, "box", supplied=("inner",))
    with pytest.raises(ConfigError, match=r"needs \['inner'\]"):
        check_arguments(Box, {}, "box")
