"""Fixtures shared by every test directory (pytest puts tests/ on sys.path for this file, so test files import
the shared helpers in tiny_models.py by name)."""

from __future__ import annotations

import pytest
from tiny_models import CharTokenizer


@pytest.fixture
def tokenizer() -> CharTokenizer:
    return CharTokenizer()
