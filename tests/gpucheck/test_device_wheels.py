"""scripts/gather_device_wheels.sh takes its versions from requirements/lock.txt (no second copy of the pins)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what the GPU machine's image lacks for the recipe and the tests (docs/loss.md, "Running the GPU check")
NEEDED = {"hydra-core", "omegaconf", "antlr4-python3-runtime", "soundfile", "cffi", "pycparser", "jiwer", "rapidfuzz"}


@pytest.mark.slow
def test_pins_are_the_lock_files():
    process = subprocess.run(
        ["bash", str(REPO / "scripts" / "gather_device_wheels.sh"), "--print-pins"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 0, process.stderr
    pins = dict(line.split("==") for line in process.stdout.split())
    locked = {}
    for line in (REPO / "requirements" / "lock.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith((" ", "#")):
            locked[name.lower()] = version
    assert NEEDED <= set(pins)
    assert {name: locked[name] for name in pins} == pins
