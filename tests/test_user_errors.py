"""A user's mistake in every kind of entry point prints its message and exits 1 without a traceback; the debug
switch (ASR_PLUGIN_DEBUG=1 for the scripts, Hydra's HYDRA_FULL_ERROR=1 for the recipes) gives the traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("ASR_PLUGIN_DEBUG", "HYDRA_FULL_ERROR")}
    environment.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, env={**environment, **env}, timeout=300
    )


def test_a_script_prints_the_message_and_the_debug_switch_the_traceback(tmp_path):
    missing = tmp_path / "missing.ckpt"
    script = str(REPO / "scripts" / "export_onnx.py")
    plain = _run(tmp_path, script, str(missing), str(tmp_path / "out"))
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert plain.stderr.startswith("error: ") and str(missing) in plain.stderr and "ASR_PLUGIN_DEBUG=1" in plain.stderr
    debug = _run(tmp_path, script, str(missing), str(tmp_path / "out"), ASR_PLUGIN_DEBUG="1")
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_a_recipe_prints_the_message_and_hydras_switch_the_traceback(tmp_path):
    recipe = str(REPO / "recipes" / "librispeech" / "eval.py")
    overrides = [f"checkpoint={tmp_path / 'nothing-here'}", f"paths.root_dir={tmp_path}", "hydra.run.dir=."]
    plain = _run(tmp_path, recipe, *overrides)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr, plain.stderr
    assert "error: " in plain.stderr and "nothing-here" in plain.stderr and "HYDRA_FULL_ERROR=1" in plain.stderr
    debug = _run(tmp_path, recipe, *overrides, HYDRA_FULL_ERROR="1")
    assert debug.returncode == 1 and "Traceback" in debug.stderr
