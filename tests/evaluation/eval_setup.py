"""eval.py's config composed for the tiny mini corpus (a uniquely named module, imported by name from
tests/evaluation)."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from test_evaluation_recipe import CONF_DIR
from tiny_models import TINY_CORPUS


def eval_cfg(root: Path, checkpoint: Path, *overrides: str):
    """conf/eval.yaml on the tiny mini corpus under `root`, greedy decoding, results in `root`/eval."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(
            config_name="eval",
            overrides=[
                *TINY_CORPUS,
                f"paths.root_dir={root}",
                f"output_dir={root}/eval",
                f"checkpoint={checkpoint}",
                "decoding.methods=[greedy]",
                *overrides,
            ],
        )
