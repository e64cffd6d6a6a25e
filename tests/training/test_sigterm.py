"""SIGTERM (a scheduler, ``docker stop``, ``kill``) stops training at the next optimizer-step boundary with a
checkpoint, a summary naming the reason and exit status 143, and run.sh stops there
(`asr_plugin.training.signal_stop`)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from train_configs import REPO_ROOT, TINY_RUN, StubTrainer, job_free_env, train_steps

from asr_plugin.training.signal_stop import PREPARATION, StepBoundaryStop, StoppedBySignal, stop_on_signal

pytestmark = pytest.mark.xdist_group("processes")  # processes of their own, timed against each other

TRAIN = str(REPO_ROOT / "recipes" / "librispeech" / "train.py")


def test_sigterm_waits_for_the_step_boundary_even_after_lightning_replaced_the_handler(tmp_path):
    trainer, callback = StubTrainer(tmp_path), StepBoundaryStop()
    before = signal.getsignal(signal.SIGTERM)
    callback.setup(trainer, None, "fit")
    signal.signal(signal.SIGTERM, lambda *args: pytest.fail("Lightning's handler ran"))  # as Trainer._run does
    callback.on_train_start(trainer, None)
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler only takes note
        assert callback.requested and trainer.saved == []
        callback.on_train_batch_end(trainer, None, None, None, batch_idx=4)  # mid-accumulation
        assert trainer.saved == []
        with pytest.raises(StoppedBySignal) as stopped:
            callback.on_train_batch_end(trainer, None, None, None, batch_idx=5)
    finally:
        callback.teardown(trainer, None, "fit")
    assert trainer.saved == ["hpc_ckpt_1.ckpt"]
    assert stopped.value.stop.signal == "SIGTERM" and stopped.value.stop.exit_status == 143
    assert stopped.value.stop.step == 7 and stopped.value.stop.checkpoint == str(tmp_path / "hpc_ckpt_1.ckpt")
    assert signal.getsignal(signal.SIGTERM) == before


def _closes_with_a_signal():
    """A generator whose clean-up is where SIGTERM lands (as a process pool's ``__exit__`` did)."""
    try:
        yield 1
        yield 2
    finally:
        os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_whose_exception_garbage_collection_swallowed_still_stops_the_block():
    before = signal.getsignal(signal.SIGTERM)
    finished = False
    with pytest.raises(StoppedBySignal) as stopped:
        with stop_on_signal(PREPARATION):
            for _ in zip([0], _closes_with_a_signal()):  # zip stops first: the generator is closed when dropped
                pass
            finished = True  # the handler's own exception was swallowed, so the block went on to its end
    assert finished
    assert stopped.value.stop.stage == PREPARATION and stopped.value.stop.exit_status == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_signal_whose_exception_became_another_one_stops_the_block_naming_both():
    with pytest.raises(StoppedBySignal) as stopped:
        with stop_on_signal(PREPARATION):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except StoppedBySignal as caught:
                raise RuntimeError("a library wrapped it") from caught
    assert isinstance(stopped.value.__cause__, RuntimeError)
    assert stopped.value.stop.signal == "SIGTERM" and stopped.value.stop.stage == PREPARATION


class _SignalsWhileEmitting(logging.Handler):
    """A handler that sends this process SIGTERM while logging holds its locks (as a progress line's emit can be
    when a scheduler's signal comes)."""

    def emit(self, record: logging.LogRecord) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)  # the handler runs here, inside logging's frames


def test_a_signal_inside_logging_leaves_logging_usable_and_stops_the_block_at_its_end():
    """Raised inside logging, the exception would leave a logging lock taken and the next thread to log would wait
    forever (a preparation that never exits): the block ends first, then stops."""
    logger = logging.getLogger("tests.sigterm.inside_logging")
    logger.propagate = False
    logger.addHandler(_SignalsWhileEmitting())
    finished = False
    try:
        with pytest.raises(StoppedBySignal) as stopped:
            with stop_on_signal(PREPARATION):
                logger.warning("a progress line")
                finished = True
        other = threading.Thread(target=logging.getLogger("tests.sigterm.other").warning, args=("from a thread",))
        other.start()
        other.join(timeout=10)
        assert not other.is_alive(), "logging's lock was left taken"
    finally:
        logger.handlers.clear()
    assert finished and stopped.value.stop.stage == PREPARATION and stopped.value.stop.exit_status == 143


def test_a_block_without_a_signal_raises_its_own_errors_unchanged():
    with pytest.raises(ValueError, match="its own"):
        with stop_on_signal(PREPARATION):
            raise ValueError("its own")


def _stub_bin(tmp_path: Path) -> Path:
    """A `python` that logs its arguments and, on SIGTERM, exits 143 as training does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "python").write_text(
        f"#!/bin/sh\necho \"$1\" >> {log}\ntrap 'echo TERM >> {log}; exit 143' TERM\nwhile :; do sleep 0.05; done\n"
    )
    (bin_dir / "python").chmod(0o755)
    return bin_dir


def test_run_sh_forwards_sigterm_to_training_and_stops(tmp_path):
    bin_dir = _stub_bin(tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    (tmp_path / "data").mkdir()
    script = subprocess.Popen(
        [
            "bash",
            "recipes/librispeech/run.sh",
            "--stage",
            "3",
            "--data-dir",
            str(tmp_path / "data"),
            "--exp-dir",
            str(tmp_path / "exp"),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = tmp_path / "calls.log"
    deadline = time.monotonic() + 60
    while not log.exists():
        assert script.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    script.send_signal(signal.SIGTERM)
    out, err = script.communicate(timeout=60)
    assert script.returncode == 143, (out, err)
    assert log.read_text().split() == ["recipes/librispeech/train.py", "TERM"]  # stage 4 never started
    assert "stage 4" not in out and "train.py exited with status 143; stopping" in err


@pytest.mark.slow
def test_sigterm_during_training_checkpoints_at_a_step_boundary_and_exits_143(data_dir, tmp_path):
    env = job_free_env(ASR_RUN_ID="stopped")
    overrides = [
        *TINY_RUN,
        "trainer.max_epochs=1000",
        "trainer.max_steps=100000",
        "trainer.limit_val_batches=0",
        "trainer.accumulate_grad_batches=2",
        "callbacks.step_checkpoint.every_n_train_steps=100000",
        f"paths.data_dir={data_dir}",
        f"paths.log_dir={tmp_path}/logs",
    ]
    run_dir = tmp_path / "logs" / "train" / "runs" / "stopped"
    job = subprocess.Popen(
        [sys.executable, TRAIN, *overrides],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while len(train_steps(run_dir / "csv" / "metrics.csv")) < 2:
            assert job.poll() is None and time.monotonic() < deadline, job.stderr.read()[-3000:]
            time.sleep(0.1)
        job.send_signal(signal.SIGTERM)
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 143, err[-3000:]
    checkpoint = torch.load(run_dir / "hpc_ckpt_1.ckpt", weights_only=True)
    saved = checkpoint["global_step"]
    steps_done = checkpoint["loops"]["fit_loop"]["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]
    assert steps_done["step"]["total"] == {"ready": saved, "completed": saved}, steps_done
    # the second of the step's two batches (saved in its batch-end hook, before Lightning counts it completed)
    assert checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]["total"]["ready"] == 2 * saved
    assert (
        f"stopped by SIGTERM at step {saved}: checkpoint {run_dir / 'hpc_ckpt_1.ckpt'} (resume with "
        "ckpt_path=last); no test; exit status 143"
    ) in out


def _recipe(overrides: list[str], tmp_path: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(
        ASR_RUN_ID="stopped",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(Path(__file__).parent), env.get("PYTHONPATH", "")]),
    )
    command = [sys.executable, TRAIN, *TINY_RUN, *overrides, f"paths.log_dir={tmp_path}/logs"]
    return subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _terminate_when(job: subprocess.Popen, started) -> tuple[str, str]:
    """Sends SIGTERM once `started()` holds; the job's output."""
    try:
        deadline = time.monotonic() + 300
        while not started():
            assert job.poll() is None and time.monotonic() < deadline, job.stderr.read()[-3000:]
            time.sleep(0.1)
        job.send_signal(signal.SIGTERM)
        return job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()


def _pause_in(stage: str, marker: Path) -> list[str]:
    return [
        "+callbacks.pause._target_=training_synthetic.PauseIn",
        f"+callbacks.pause.stage={stage}",
        f"+callbacks.pause.marker={marker}",
    ]


@pytest.mark.slow
def test_sigterm_during_the_validation_before_training_exits_143_having_trained_nothing(data_dir, tmp_path):
    marker = tmp_path / "validating"
    overrides = [
        "validate_first=true",
        "trainer.limit_val_batches=3",
        "trainer.max_steps=50",
        f"paths.data_dir={data_dir}",
    ]
    job = _recipe([*overrides, *_pause_in("validate", marker)], tmp_path)
    out, err = _terminate_when(job, marker.exists)
    assert job.returncode == 143, err[-3000:]
    assert (
        "stopped by SIGTERM during the validation before training: nothing trained, no checkpoint written, no test"
        in out
    ), out
    run_dir = tmp_path / "logs" / "train" / "runs" / "stopped"
    assert train_steps(run_dir / "csv" / "metrics.csv") == []
    assert not list(run_dir.rglob("*.ckpt"))


@pytest.mark.slow
def test_sigterm_during_the_test_exits_143_and_says_the_test_gave_no_results(data_dir, tmp_path):
    marker = tmp_path / "testing"
    overrides = ["test=true", "trainer.max_steps=1", f"paths.data_dir={data_dir}"]
    job = _recipe([*overrides, *_pause_in("test", marker)], tmp_path)
    out, err = _terminate_when(job, marker.exists)
    assert job.returncode == 143, err[-3000:]
    assert "stopped by SIGTERM during the test: training is complete (step 1, checkpoint " in out, out
    assert "the test did not finish and gave no results" in out and "test WER" not in out


@pytest.mark.slow
def test_sigterm_during_data_preparation_exits_143_and_says_what_is_kept(tmp_path):
    job = _recipe([f"paths.data_dir={tmp_path}/data"], tmp_path)
    seen: list[str] = []

    def synthesizing() -> bool:
        seen.append(job.stderr.readline())
        return "synthesizing speech with" in seen[-1]

    out, err = _terminate_when(job, synthesizing)
    assert job.returncode == 143, "".join(seen) + err[-3000:]
    assert "stopped by SIGTERM during data preparation: the files it finished are kept and reused" in out, out
