"""Fixtures of the decoding, fine-tuning, evaluation and export tests (helpers: tiny_models.py)."""

from __future__ import annotations

import pytest
from tiny_models import CharTokenizer


@pytest.fixture
def tokenizer() -> CharTokenizer:
    return CharTokenizer()
