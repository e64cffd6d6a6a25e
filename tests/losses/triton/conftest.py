"""The Triton kernels run here on CPU tensors under Triton's interpreter.

``TRITON_INTERPRET`` must be set before the process first imports ``triton`` (torch imports it with, e.g.,
``asr_plugin.losses``; the language's own helpers are defined then), so these tests cannot share a process with
the rest of the suite. Without it they are not collected: ``tests/losses/test_triton_interpreter.py`` runs
them in a subprocess that has it (directly: ``TRITON_INTERPRET=1 python -m pytest tests/losses/triton``).
"""

from __future__ import annotations

import os

import pytest

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
collect_ignore_glob = [] if INTERPRETING else ["test_*.py"]


@pytest.fixture(autouse=True)
def triton_interpreter():
    from asr_plugin.losses.triton.ops import interpreting

    if not interpreting():
        pytest.fail("TRITON_INTERPRET=1 is set, but asr_plugin's Triton kernels were not defined under it")


def pytest_configure(config):
    # numpy's warnings about log(0) and inf - inf inside the interpreter: the kernels mask those lanes
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:triton.runtime.interpreter")
