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
def test_triton_kernels_under_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(FOLDER)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
