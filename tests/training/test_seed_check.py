"""``seed=abc`` is a ConfigError naming the key, before anything runs."""

from __future__ import annotations

import pytest
from train_configs import compose_train

from asr_plugin.config_nodes import ConfigError
from asr_plugin.training import train
from asr_plugin.training.config_check import checked_seed


@pytest.mark.parametrize("value", ["abc", 1.5, True, -1, 2**32])
def test_a_seed_that_is_not_a_32_bit_integer_is_refused_by_name(value):
    with pytest.raises(ConfigError, match=r"seed=.* must be an integer in \[0, 2\*\*32\)"):
        checked_seed(value)


def test_train_refuses_it_before_preparing_data(tmp_path):
    with pytest.raises(ConfigError, match=r"seed='abc' must be an integer"):
        train(compose_train(["seed=abc", f"paths.data_dir={tmp_path}/data"], tmp_path=tmp_path))
    assert not (tmp_path / "data").exists()


def test_integer_seeds_pass():
    assert checked_seed(0) == 0 and checked_seed(1234) == 1234
