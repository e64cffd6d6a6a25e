"""Loads scripts/make_nemo_fixtures.py (not a package) for the NeMo import tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_nemo_fixtures.py"


def fixture_script() -> ModuleType:
    """The fixture script as a module: its config builders need no NeMo, `make_fixture` does."""
    spec = importlib.util.spec_from_file_location("make_nemo_fixtures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
