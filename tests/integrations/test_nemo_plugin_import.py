"""asr_plugin.integrations.nemo imports without NeMo and says what to install when NeMo is needed (no NeMo needed:
where NeMo is installed it is hidden for these tests)."""

from __future__ import annotations

import importlib
import sys

import pytest

import asr_plugin.integrations


@pytest.fixture
def integration(monkeypatch):
    """A fresh import of asr_plugin.integrations.nemo with NeMo unimportable."""
    for name in list(sys.modules):
        if name.split(".")[0] == "nemo" or name.startswith("asr_plugin.integrations.nemo"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "nemo", None)  # `import nemo` now raises ModuleNotFoundError
    monkeypatch.delattr(asr_plugin.integrations, "nemo", raising=False)
    return importlib.import_module("asr_plugin.integrations.nemo")


def test_imports_without_nemo(integration):
    assert integration.NEMO_TESTED == "3.0.0"
    assert set(integration.__all__) >= {"SampleWiseRNNTJoint", "use_samplewise", "allow_in_nemo_configs"}
    assert "nemo" not in [name.split(".")[0] for name, module in sys.modules.items() if module is not None]


@pytest.mark.parametrize("name", ["SampleWiseRNNTJoint", "use_samplewise", "allow_in_nemo_configs"])
def test_using_it_without_nemo_says_what_to_install(integration, name):
    with pytest.raises(ImportError, match=rf"asr_plugin\.integrations\.nemo\.{name} needs NeMo") as raised:
        getattr(integration, name)
    assert "pip install 'nemo-toolkit[asr]==3.0.0'" in str(raised.value)
    assert isinstance(raised.value.__cause__, ImportError)  # NeMo's own import error is kept


def test_from_import_without_nemo_fails_clearly(integration):
    with pytest.raises(ImportError, match="needs NeMo"):
        from asr_plugin.integrations.nemo import use_samplewise  # noqa: F401


def test_unknown_name_is_an_attribute_error(integration):
    with pytest.raises(AttributeError, match="no attribute 'SampleWiseJoint'"):
        integration.SampleWiseJoint  # noqa: B018
