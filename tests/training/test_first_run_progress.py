"""The recipe's first run is never silent for long: each stage of the data preparation (each engine's
synthesis, the audio checks of every split, the tokenizer, the feature statistics) says what it does, how far it
is and its ETA, in whole lines when the output is a log (`asr_plugin.progress`), not a redrawn bar."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from train_configs import REPO_ROOT, TINY_RUN

pytestmark = pytest.mark.slow  # a first run: synthesis, preparation and one training step in a subprocess


def test_a_first_run_logs_every_preparation_stage_with_counts_and_eta(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    command = [
        sys.executable,
        str(REPO_ROOT / "recipes" / "librispeech" / "train.py"),
        *TINY_RUN,
        "data.frontend=null",  # a front end with global statistics: their stage too
        "trainer.max_steps=1",
        "trainer.limit_val_batches=0",
        f"paths.data_dir={tmp_path}/data",
        f"paths.log_dir={tmp_path}/logs",
    ]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stdout + done.stderr
    assert "\r" not in log  # no bar redrawn into a log

    def lines(stage: str) -> list[str]:
        return re.findall(rf"^{re.escape(stage)}: (\d+)/(\d+) utt \(\d+ %\), [\d:]+ elapsed, ETA ([\d:?]+)", log, re.M)

    stages = [
        "synthesizing speech with espeak",
        "synthesizing speech with piper",
        *(f"{split}: checking audio" for split in ("train", "dev", "test-espeak", "test-piper")),
        "feature stats",
    ]
    for stage in stages:
        counted = lines(stage)
        assert len(counted) >= 2, (stage, log[-3000:])
        (first, total, eta), (last, last_total, last_eta) = counted[0], counted[-1]
        assert (first, eta) == ("0", "?") and last == last_total == total and last_eta == "00:00", counted
    assert int(lines("train: checking audio")[0][1]) == 24 and int(lines("feature stats")[0][1]) == 24
    assert "tokenizer: training a 48-id bpe model on 24 transcripts" in log
