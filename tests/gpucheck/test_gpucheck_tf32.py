"""gpucheck.tf32: the script runs as __main__ with its arguments and TF32 allowed, and a script
that switches the setting off fails the run."""

from __future__ import annotations

import pytest
import torch

from gpucheck.tf32 import run_with_tf32


@pytest.fixture
def restore_tf32():
    before = torch.backends.cuda.matmul.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def test_script_sees_tf32_allowed_and_its_arguments(tmp_path, restore_tf32):
    torch.backends.cuda.matmul.allow_tf32 = False
    record = tmp_path / "seen.txt"
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys, torch\nif __name__ == '__main__':\n"
        "    open(sys.argv[2], 'w').write(f'{torch.backends.cuda.matmul.allow_tf32} {sys.argv[1]}')\n"
    )
    run_with_tf32(script, ["--flag", str(record)])
    assert record.read_text() == "True --flag"
    assert torch.backends.cuda.matmul.allow_tf32


def test_a_script_that_switches_tf32_off_fails(tmp_path, restore_tf32):
    script = tmp_path / "rogue.py"
    script.write_text("import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\n")
    with pytest.raises(RuntimeError, match="switched torch.backends.cuda.matmul.allow_tf32 off"):
        run_with_tf32(script, [])


def test_a_missing_script_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.py"):
        run_with_tf32(tmp_path / "nope.py", [])
