"""Checkpoints under their final names are complete: a failed or killed write keeps the previous checkpoint.

Lightning's own save writes its temporary file in TMPDIR; with TMPDIR on another file system (``/dev/shm`` here,
node-local scratch on clusters) the final step is a copy onto ``last.ckpt``, which a kill or a full disk cuts
short. ``AtomicCheckpointIO`` writes next to the target and renames.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from train_configs import REPO_ROOT, TINY_RUN

from asr_plugin.formats.checkpoint import read_checkpoint
from asr_plugin.training import train
from asr_plugin.training.checkpoint_io import AtomicCheckpointIO

TRAIN = str(REPO_ROOT / "recipes" / "librispeech" / "train.py")
EVERY_STEP = [
    "callbacks.model_checkpoint=null",
    "callbacks.step_checkpoint.every_n_train_steps=1",
    "trainer.max_epochs=1000",
    "trainer.limit_val_batches=0",
]


class _Unpicklable:
    def __reduce__(self):
        raise RuntimeError("cannot serialise this")


def test_a_failed_save_keeps_the_previous_checkpoint_and_leaves_no_partial_file(tmp_path):
    io, path = AtomicCheckpointIO(), tmp_path / "last.ckpt"
    io.save_checkpoint({"global_step": 1, "weights": torch.ones(1000)}, path)
    with pytest.raises(OSError, match="cannot serialise"):  # torch.save fails after writing part of the file
        io.save_checkpoint({"global_step": 2, "weights": torch.ones(1000), "bad": _Unpicklable()}, path)
    assert io.load_checkpoint(path)["global_step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_a_url_is_refused_instead_of_becoming_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="s3://bucket/run/last.ckpt is a URL"):
        AtomicCheckpointIO().save_checkpoint({"global_step": 1}, "s3://bucket/run/last.ckpt")
    assert list(tmp_path.iterdir()) == []


def test_loading_never_runs_pickled_code(tmp_path):
    path = tmp_path / "evil.ckpt"
    torch.save({"global_step": 1, "code": _Runs()}, path)
    with pytest.raises(Exception, match="(?i)weights_only"):
        AtomicCheckpointIO().load_checkpoint(path, weights_only=False)  # the caller's False is overruled


class _Runs:
    def __reduce__(self):
        return (print, ("ran",))


def _readable_checkpoints(directory: Path) -> dict[str, int]:
    """{name: global step} of every checkpoint under a final name; raises on any unreadable one."""
    return {
        p.name: read_checkpoint(p)["global_step"]
        for p in sorted(directory.glob("*.ckpt"))
        if not p.name.startswith(".")
    }


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "ASR_RUN_ID"))}
    return {
        **env,
        "OMP_NUM_THREADS": "1",
        **extra,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    }


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm (a tmpfs) for TMPDIR on another file system")
def test_kill_during_the_rewrite_of_last_ckpt_keeps_the_previous_one(data_dir, tmp_path):
    tmpdir = Path(f"/dev/shm/asr_plugin_test_{os.getpid()}")
    tmpdir.mkdir(exist_ok=True)
    assert os.stat(tmpdir).st_dev != os.stat(tmp_path).st_dev, "TMPDIR must be on another file system"
    run_dir, markers = tmp_path / "run", tmp_path / "markers"
    command = [
        sys.executable,
        TRAIN,
        *TINY_RUN,
        *EVERY_STEP,
        "trainer.max_steps=1000",
        f"paths.data_dir={data_dir}",
        f"hydra.run.dir={run_dir}",
        "+callbacks.payload._target_=training_synthetic.CheckpointPayload",
        "+callbacks.payload.megabytes=300",
        f"+callbacks.payload.marker_dir={markers}",
    ]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=_env(TMPDIR=str(tmpdir)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    checkpoints, last = run_dir / "checkpoints", run_dir / "checkpoints" / "last.ckpt"
    try:
        deadline = time.monotonic() + 300
        while not (markers / "saving-3").exists():  # step 2's last.ckpt is complete; step 3's rewrite begins
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()[-3000:]
            time.sleep(0.01)
        before = last.stat()
        while process.poll() is None:  # kill as soon as the rewrite touches the directory
            partial = [p for p in checkpoints.iterdir() if p.name.startswith(".")]
            now = last.stat()
            if partial or (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
                break
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        shutil.rmtree(tmpdir, ignore_errors=True)
    steps = _readable_checkpoints(checkpoints)  # raises if last.ckpt was left truncated
    assert steps["last.ckpt"] in (2, 3)


def _mount_tmpfs(path: Path, size: str) -> str | None:
    """Mounts a tmpfs of `size` at `path`; the reason it cannot, or None."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return "mounting a small tmpfs needs root and mount(8)"
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip()}"


@pytest.mark.slow
def test_a_full_disk_keeps_the_previous_checkpoint_and_the_metrics(tiny_run, tmp_path):
    disk = tmp_path / "disk"
    reason = _mount_tmpfs(disk, "20m")
    if reason:
        pytest.skip(reason)
    try:
        cfg = tiny_run(
            [
                *EVERY_STEP,
                "trainer.max_steps=20",
                "+callbacks.payload._target_=training_synthetic.CheckpointPayload",
                "+callbacks.payload.megabytes=6",
                f"+callbacks.payload.marker_dir={tmp_path / 'markers'}",
                "+callbacks.payload.grow_at_step=4",
                "+callbacks.payload.grown_megabytes=16",
            ]
        )
        cfg.paths.output_dir = str(disk / "run")
        with pytest.raises(OSError, match=r"writing checkpoint .*last\.ckpt failed .*previous last\.ckpt is kept"):
            train(cfg)  # 6 MiB last.ckpt + 16 MiB of its rewrite > 20 MiB
        checkpoints = disk / "run" / "checkpoints"
        assert _readable_checkpoints(checkpoints) == {"last.ckpt": 3}
        assert not [p for p in checkpoints.iterdir() if p.name.startswith(".")], "the partial file is removed"
        rows = (disk / "run" / "csv" / "metrics.csv").read_text().splitlines()
        assert rows[0].startswith("epoch,step") and len(rows) >= 4
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=False)  # lazy: a file may still be open
