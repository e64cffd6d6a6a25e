"""asr_plugin.integrations.transformers imports without transformers and says what to install when it is needed (no
transformers needed: where it is installed it is hidden for these tests)."""

from __future__ import annotations

import importlib
import sys

import pytest

import asr_plugin.integrations


@pytest.fixture
def integration(monkeypatch):
    """A fresh import of asr_plugin.integrations.transformers with transformers unimportable."""
    for name in list(sys.modules):
        if name.split(".")[0] == "transformers" or name.startswith("asr_plugin.integrations.transformers"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ModuleNotFoundError
    monkeypatch.delattr(asr_plugin.integrations, "transformers", raising=False)
    return importlib.import_module("asr_plugin.integrations.transformers")


def test_imports_without_transformers(integration):
    assert integration.TRANSFORMERS_TESTED == "5.23.0"
    assert set(integration.__all__) >= {"use_samplewise", "undo_samplewise", "ParakeetJoint"}
    assert "transformers" not in [name.split(".")[0] for name, module in sys.modules.items() if module is not None]


@pytest.mark.parametrize("name", ["use_samplewise", "undo_samplewise", "ParakeetJoint"])
def test_using_it_without_transformers_says_what_to_install(integration, name):
    with pytest.raises(
        ImportError, match=rf"asr_plugin\.integrations\.transformers\.{name} needs Hugging Face"
    ) as raised:
        getattr(integration, name)
    assert "pip install 'transformers==5.23.0'" in str(raised.value)
    assert isinstance(raised.value.__cause__, ImportError)  # transformers' own import error is kept


def test_unknown_name_is_an_attribute_error(integration):
    with pytest.raises(AttributeError, match="no attribute 'SampleWiseJoint'"):
        integration.SampleWiseJoint  # noqa: B018
