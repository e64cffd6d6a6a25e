"""Names that moved out of a package to their own room are still importable from where they were public, as the
same objects: ``from asr_plugin.data import write_atomic`` keeps working (docs/CONTRIBUTING_NOTES.md, "Where things
live")."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from asr_plugin.data import SpecAugment
from asr_plugin.training.lightning_module import SPEC_AUGMENT_TARGETS

# old public home -> {name: its home now}
MOVED = {
    "asr_plugin.data": {
        "write_atomic": "asr_plugin.files",
        "write_bytes_atomic": "asr_plugin.files",
        "write_text_atomic": "asr_plugin.files",
        "SAMPLE_RATE": "asr_plugin.audio",
        "load_audio": "asr_plugin.audio",
        "probe_audio": "asr_plugin.audio",
        "BLANK_ID": "asr_plugin.text",
        "CONVENTIONS": "asr_plugin.text",
        "LIBRISPEECH_NORMALIZER": "asr_plugin.text",
        "NormalizationCounts": "asr_plugin.text",
        "TextNormalizer": "asr_plugin.text",
        "Tokenizer": "asr_plugin.text",
        "train_tokenizer": "asr_plugin.text",
        "FRONTEND_KINDS": "asr_plugin.frontend",
        "FeatureStats": "asr_plugin.frontend",
        "GlobalNormalize": "asr_plugin.frontend",
        "LogMelFeatures": "asr_plugin.frontend",
        "LogMelFrontend": "asr_plugin.frontend",
        "build_frontend": "asr_plugin.frontend",
        "complete_frontend_spec": "asr_plugin.frontend",
        "frontend_feature_dim": "asr_plugin.frontend",
        "frontend_needs_stats": "asr_plugin.frontend",
        "with_stats": "asr_plugin.frontend",
    },
    "asr_plugin.models": {
        "NemoMelFrontend": "asr_plugin.frontend",
    },
}


@pytest.mark.parametrize(
    "old, name, new", [(old, name, new) for old, names in MOVED.items() for name, new in names.items()]
)
def test_a_moved_name_is_the_same_object_at_its_old_public_path(old, name, new):
    old_module = importlib.import_module(old)
    assert name in old_module.__all__
    assert getattr(old_module, name) is getattr(importlib.import_module(new), name)


def conf_targets() -> list[str]:
    """Every ``_target_`` of this project that a config under conf/ names."""
    root = Path(__file__).resolve().parents[1] / "conf"
    found = {m.group(1) for path in root.rglob("*.yaml") for m in TARGET_LINE.finditer(path.read_text())}
    return sorted(target for target in found if target.startswith("asr_plugin."))


TARGET_LINE = re.compile(r"^\s*_target_:\s*(\S+)", re.MULTILINE)


@pytest.mark.parametrize("target", conf_targets())
def test_every_target_of_the_configs_resolves(target):
    module, _, name = target.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))


def test_a_spec_augment_node_naming_its_former_module_still_builds():
    """A checkpoint written before data/ was cut by job may name SpecAugment by its defining module then."""
    node = {"_target_": "asr_plugin.data.augment.SpecAugment", "num_freq_masks": 1, "num_time_masks": 0}
    built = SPEC_AUGMENT_TARGETS.build(node, "spec_augment")
    assert type(built) is SpecAugment and built.num_freq_masks == 1
    assert "asr_plugin.data.augment.SpecAugment" not in SPEC_AUGMENT_TARGETS.names()  # not offered to new configs
