"""The Triton backend's tests (tests/losses/triton) in a subprocess under Triton's interpreter, which must be
switched on before the process first imports triton (see that folder's conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parent / "triton"


@pytest.mark.slow
@pytest.mark.parametrize("tests", sorted(path.name for path in FOLDER.glob("test_*.py")))
def test_triton_kernels_under_the_interpreter(tests):
    """One subprocess per file, so that pytest-xdist's workers share them."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(FOLDER / tests)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
