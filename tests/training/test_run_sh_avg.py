"""run.sh's stage 3 keeps the --avg best checkpoints that stage 4 averages (with a stub `python` that records
the command lines run.sh would run; nothing is trained)."""

from __future__ import annotations

import os
import subprocess

import pytest
from train_configs import REPO_ROOT

RUN_SH = REPO_ROOT / "recipes" / "librispeech" / "run.sh"


def stage_3_arguments(tmp_path, avg: str) -> list[str]:
    stub = tmp_path / "bin" / "python"
    stub.parent.mkdir(exist_ok=True)
    calls = tmp_path / f"calls-{avg}"
    stub.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$@" >> {calls}\n')
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(
        ["bash", str(RUN_SH), "--data-dir", str(tmp_path), "--stage", "3", "--stop-stage", "3", "--avg", avg],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return calls.read_text().splitlines()


@pytest.mark.parametrize(("avg", "kept"), [("10", "10"), ("3", None), ("5", None)])
def test_stage_3_keeps_as_many_checkpoints_as_stage_4_averages(tmp_path, avg, kept):
    arguments = stage_3_arguments(tmp_path, avg)
    assert arguments[0].endswith("recipes/librispeech/train.py")
    keeps = [a for a in arguments if a.startswith("callbacks.model_checkpoint.save_top_k=")]
    assert keeps == ([f"callbacks.model_checkpoint.save_top_k={kept}"] if kept else []), "else the config's 5"
