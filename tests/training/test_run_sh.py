"""recipes/librispeech/run.sh stages 0-4 end to end on a read-only synthetic LibriSpeech-layout corpus, as a
user runs it."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from train_configs import MICRO_MODEL, REPO_ROOT

# The recipe's defaults (experiment=librispeech_medium) cut down to a micro model on the CPU, two epochs
# of two steps each (two best checkpoints to average in stage 4).
TINY_TRAIN_ARGS = [
    "model=tiny",
    *MICRO_MODEL,
    "trainer=default",
    "trainer.max_epochs=2",
    "trainer.limit_train_batches=2",
    "trainer.limit_val_batches=1",
    "trainer.enable_progress_bar=false",
    "callbacks.model_summary=null",
    "data.num_workers=0",
    "data.frontend=null",  # a front end with global statistics: stage 2 has work
    "data.max_duration=8",
    "data.num_buckets=2",
    "data.speed_perturb=null",
    "data.pin_memory=false",
    "test=false",
]


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}",
    }
    return subprocess.run(list(args), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _read_only_mount_works(directory: Path) -> bool:
    """Whether `directory` can be bind-mounted read-only onto itself in a private mount namespace (root with
    CAP_SYS_ADMIN; containers often refuse)."""
    if not shutil.which("unshare"):
        return False
    d = shlex.quote(str(directory))
    probe = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount --bind {d} {d} && mount -o remount,bind,ro {d}",
        ],
        capture_output=True,
    )
    return probe.returncode == 0


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.slow
def test_run_sh_stages_0_to_4_on_a_read_only_corpus(tmp_path):
    data_dir, work_dir, exp_dir = tmp_path / "data", tmp_path / "work", tmp_path / "exp"
    made = _run(
        sys.executable,
        "scripts/make_synthetic_librispeech.py",
        "--root",
        str(data_dir / "LibriSpeech"),
        "--split",
        "train-clean-100:16",
        "--split",
        "dev-clean:4",
        "--split",
        "test-clean:4",
        "--min-seconds",
        "1",
        "--max-seconds",
        "2",
    )
    assert made.returncode == 0, made.stderr
    for path in [data_dir, *data_dir.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    before = _listing(data_dir)

    run_sh = [
        "bash",
        "recipes/librispeech/run.sh",
        "--data-dir",
        str(data_dir),
        "--work-dir",
        str(work_dir),
        "--nj",
        "1",
        "--train-splits",
        "train-clean-100",
        "--valid-splits",
        "dev-clean",
        "--eval-splits",
        "dev-clean test-clean",
        "--vocab-size",
        "40",
        "--exp-dir",
        str(exp_dir),
        "--avg",
        "2",
        "--train-args",
        " ".join(TINY_TRAIN_ARGS),
        "--eval-args",
        "decoding.methods=[greedy]",
    ]
    # Tests run as root, which ignores the permissions above. Where mounting is allowed the data directory is
    # really made unwritable (a read-only bind mount of it onto itself, in a private mount namespace that ends
    # with the command); everywhere the listing (names, sizes, mtimes) is compared before and after.
    read_only = _read_only_mount_works(data_dir)
    if read_only:
        d = shlex.quote(str(data_dir))
        script = (
            f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && "
            f"if touch {d}/probe 2>/dev/null; then echo 'corpus still writable'; exit 3; fi && "
            f"exec {shlex.join(run_sh)}"
        )
        run_sh = ["unshare", "--mount", "--propagation", "private", "bash", "-c", script]
    done = _run(*run_sh)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    for stage in range(5):
        assert f"stage {stage}:" in done.stdout
    assert _listing(data_dir) == before, "run.sh wrote into the corpus directory"

    assert {p.name for p in work_dir.glob("*.jsonl")} == {
        "train-clean-100.jsonl",
        "dev-clean.jsonl",
        "test-clean.jsonl",
    }
    assert (work_dir / "tokenizer_bpe40.model").is_file() and (work_dir / "feature_stats.json").is_file()
    # stage 3 trained the experiment (its task name and schedule) with the test's overrides on top, reading the
    # work directory stages 0-2 wrote
    config = (exp_dir / ".hydra" / "config.yaml").read_text()
    assert "task_name: librispeech_medium" in config and "warmup_steps: 9000" in config
    assert "d_model: 32" in config and "accelerator: cpu" in config and f"work_dir: {work_dir}" in config
    assert len([p for p in (exp_dir / "checkpoints").glob("epoch*.ckpt")]) == 2
    # stage 4 decoded both eval splits with the average of those two checkpoints
    summary = json.loads((exp_dir / "decode_avg2" / "wer-summary.json").read_text())
    text = json.dumps(summary)
    assert "dev-clean" in text and "test-clean" in text
    assert (exp_dir / "decode_avg2" / "recogs-test-clean-greedy.txt").is_file()
    assert "checkpoints: " in done.stdout and done.stdout.count("epoch0") >= 2


@pytest.mark.slow
def test_run_sh_rejects_unknown_options_and_missing_values():
    unknown = _run("bash", "recipes/librispeech/run.sh", "--stages", "3")
    assert unknown.returncode == 2 and "unknown option --stages" in unknown.stderr
    missing = _run("bash", "recipes/librispeech/run.sh", "--train-args")
    assert missing.returncode == 2 and "--train-args needs a value" in missing.stderr
    usage = _run("bash", "recipes/librispeech/run.sh", "--help")
    assert usage.returncode == 0 and "--eval-args" in usage.stdout
