"""recipes/librispeech/run.sh stages 0-4 end to end on a synthetic LibriSpeech-layout corpus, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from train_configs import MICRO_MODEL, REPO_ROOT

# The recipe's defaults (experiment=librispeech_medium) cut down to a micro model on the CPU, two epochs
# of two steps each (two best checkpoints to average in stage 4).
TINY_TRAIN_ARGS = ["model=tiny", *MICRO_MODEL, "trainer=default", "trainer.max_epochs=2",
                   "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "trainer.enable_progress_bar=false",
                   "callbacks.model_summary=null", "data.num_workers=0", "data.max_duration=8", "data.num_buckets=2",
                   "data.speed_perturb=null", "data.pin_memory=false", "test=false"]


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(list(args), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_run_sh_stages_0_to_4_on_a_synthetic_corpus(tmp_path):
    data_dir, exp_dir = tmp_path / "data", tmp_path / "exp"
    made = _run(sys.executable, "scripts/make_synthetic_librispeech.py", "--root", str(data_dir / "LibriSpeech"),
                "--split", "train-clean-100:16", "--split", "dev-clean:4", "--split", "test-clean:4",
                "--min-seconds", "1", "--max-seconds", "2")
    assert made.returncode == 0, made.stderr

    done = _run("bash", "recipes/librispeech/run.sh", "--data-dir", str(data_dir), "--nj", "1",
                "--train-splits", "train-clean-100", "--valid-splits", "dev-clean",
                "--eval-splits", "dev-clean test-clean", "--vocab-size", "40", "--exp-dir", str(exp_dir),
                "--avg", "2", "--train-args", " ".join(TINY_TRAIN_ARGS), "--eval-args", "decoding.methods=[greedy]")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    for stage in range(5):
        assert f"stage {stage}:" in done.stdout

    manifests = data_dir / "manifests" / "librispeech"
    assert {p.name for p in manifests.glob("*.jsonl")} == {"train-clean-100.jsonl", "dev-clean.jsonl", "test-clean.jsonl"}
    assert (manifests / "tokenizer_bpe40.model").is_file() and (manifests / "feature_stats.json").is_file()
    # stage 3 trained the experiment (its task name and schedule) with the test's overrides on top
    config = (exp_dir / ".hydra" / "config.yaml").read_text()
    assert "task_name: librispeech_medium" in config and "warmup_steps: 9000" in config
    assert "d_model: 32" in config and "accelerator: cpu" in config
    assert len([p for p in (exp_dir / "checkpoints").glob("epoch*.ckpt")]) == 2
    # stage 4 decoded both eval splits with the average of those two checkpoints
    summary = json.loads((exp_dir / "decode_avg2" / "wer-summary.json").read_text())
    text = json.dumps(summary)
    assert "dev-clean" in text and "test-clean" in text
    assert (exp_dir / "decode_avg2" / "recogs-test-clean-greedy.txt").is_file()
    assert "checkpoints: " in done.stdout and done.stdout.count("epoch0") >= 2


def test_run_sh_rejects_unknown_options_and_missing_values():
    unknown = _run("bash", "recipes/librispeech/run.sh", "--stages", "3")
    assert unknown.returncode == 2 and "unknown option --stages" in unknown.stderr
    missing = _run("bash", "recipes/librispeech/run.sh", "--train-args")
    assert missing.returncode == 2 and "--train-args needs a value" in missing.stderr
    usage = _run("bash", "recipes/librispeech/run.sh", "--help")
    assert usage.returncode == 0 and "--eval-args" in usage.stdout
