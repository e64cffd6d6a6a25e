"""SIGTERM (what a scheduler, ``docker stop`` or ``kill`` sends) stops a run at any stage with a non-zero exit status
and a summary of what was and was not done.

- Training: at an optimizer-step boundary with a checkpoint, like SLURM's requeue signal
  (`asr_plugin.training.slurm_requeue`). Lightning's own SIGTERM handler stops the fit loop at the end of the batch
  it lands in (mid-accumulation too), writes nothing and leaves the process to exit with status 0, so a script
  that runs evaluation next goes on with a half-trained model. Here the signal is recorded; at the next step
  boundary every rank writes ``hpc_ckpt_<n>.ckpt`` in the run directory (what ``ckpt_path=last`` resumes from)
  and the fit ends with `StoppedBySignal`, which ``train`` turns into its summary's ``stop`` entry.
- The validation before the first step and the final test (`validate_or_stop`, `final_test_or_stop`): Lightning's
  handler ends their loop with `SIGTERMException`, a ``SystemExit`` of status 0 that would end the process
  silently; it becomes the ``stop`` entry instead (no training after an interrupted validation; no test results
  after an interrupted test).
- Data preparation (`stop_on_signal`, around ``prepare_data_once`` in `run_start.build_datamodule`): the signal raises `StoppedBySignal` at once;
  what preparation finished is kept (every file is written whole) and the next run reuses it.

The recipe prints `describe_stop` and exits with 128 + the signal's number (143), as a process killed by SIGTERM
would, so ``run.sh`` stops there.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

from asr_plugin.training.slurm_requeue import StepBoundarySignal, next_requeue_checkpoint

log = logging.getLogger(__name__)


# the stages a run can be stopped in, as `SignalStop.stage` names them
PREPARATION, VALIDATION_FIRST, TRAINING, TEST = (
    "data preparation",
    "validation before training",
    "training",
    "test",
)


@dataclasses.dataclass(frozen=True)
class SignalStop:
    """Why and where a run stopped early: the signal's name, the exit status the recipe ends with, the global
    step reached and the checkpoint that holds it ("" when none was written), and the stage it stopped in."""

    signal: str
    exit_status: int
    step: int
    checkpoint: str
    stage: str = TRAINING

    @classmethod
    def of(cls, signum: int, step: int, checkpoint: str, stage: str) -> SignalStop:
        return cls(signal.Signals(signum).name, 128 + signum, step, checkpoint, stage)


def describe_stop(stop: Mapping[str, Any]) -> str:
    """What a stopped run did and did not do, for people (`SignalStop` as a dict: ``train``'s ``stop`` entry)."""
    name, status, step, checkpoint = stop["signal"], stop["exit_status"], stop["step"], stop["checkpoint"]
    stage = stop.get("stage", TRAINING)
    if stage == TRAINING:
        return (
            f"stopped by {name} at step {step}: checkpoint {checkpoint or '(none)'} (resume with ckpt_path=last); "
            f"no test; exit status {status}"
        )
    if stage == TEST:
        return (
            f"stopped by {name} during the test: training is complete (step {step}, checkpoint "
            f"{checkpoint or '(none)'}), the test did not finish and gave no results (test the checkpoint with "
            f"eval.py); exit status {status}"
        )
    if stage == VALIDATION_FIRST:
        return (
            f"stopped by {name} during the validation before training: nothing trained, no checkpoint written, no "
            f"test (rerun the same command to start again); exit status {status}"
        )
    return (
        f"stopped by {name} during {stage}: the files it finished are kept and reused by the next run (each is "
        f"written whole), nothing trained, no test; exit status {status}"
    )


class StoppedBySignal(Exception):
    """Raised at the step boundary after the stop checkpoint is written (ends ``Trainer.fit``), or by
    `stop_on_signal` (ends ``train`` itself: the recipe prints `describe_stop` of its `stop`)."""

    def __init__(self, stop: SignalStop) -> None:
        super().__init__(describe_stop(dataclasses.asdict(stop)))
        self.stop = stop


class StepBoundaryStop(StepBoundarySignal):
    """On `signum` (SIGTERM): forwards it to the ranks Lightning launched as subprocesses (as Lightning's own
    handler does), then at the next step boundary writes the stop checkpoint and raises `StoppedBySignal`."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self._launcher: Any = None
        self.stopped_before_fit: SignalStop | None = None  # set by `validate_or_stop`: the fit does not start

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._launcher = trainer.strategy.launcher
        super().setup(trainer, pl_module, stage)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if not self.requested and self._launcher is not None and hasattr(self._launcher, "kill"):
            self._launcher.kill(signum)
        super()._on_signal(signum, frame)

    def act(self, trainer: L.Trainer) -> None:
        path = next_requeue_checkpoint(trainer.default_root_dir)
        trainer.save_checkpoint(path)
        stop = SignalStop.of(self.signum, trainer.global_step, str(path), TRAINING)
        log.warning("%s received: wrote %s at step %d; stopping", stop.signal, path, stop.step)
        raise StoppedBySignal(stop)


def _last_checkpoint(trainer: L.Trainer) -> str:
    return next((cb.last_model_path for cb in trainer.checkpoint_callbacks if getattr(cb, "last_model_path", "")), "")


def fit_or_stop(trainer: L.Trainer, stopper: StepBoundaryStop, *args: Any, **kwargs: Any) -> SignalStop | None:
    """``trainer.fit(*args, **kwargs)``; the `SignalStop` when `stopper`'s signal ended it, None when it ran to
    its end. A signal that came after the last step (during the last validation) found no step boundary: the
    run is complete and its last checkpoint is the stop's. After a stopped validation (`validate_or_stop`) the
    fit does not start, and that stop is returned."""
    if stopper.stopped_before_fit is not None:
        return stopper.stopped_before_fit
    try:
        trainer.fit(*args, **kwargs)
    except StoppedBySignal as stopped:
        return stopped.stop
    if not stopper.requested:
        return None
    return SignalStop.of(stopper.signum, trainer.global_step, _last_checkpoint(trainer), TRAINING)


def validate_or_stop(trainer: L.Trainer, stopper: StepBoundaryStop, *args: Any, **kwargs: Any) -> list[dict]:
    """``trainer.validate(*args, **kwargs)`` before training: its results, or [] when SIGTERM came during it (also in
    its last batch, which Lightning lets finish), recorded in `stopper` so that `fit_or_stop` does not train."""
    try:
        results = trainer.validate(*args, **kwargs)
    except SIGTERMException:
        results = []
    if trainer.received_sigterm:
        stopper.stopped_before_fit = SignalStop.of(signal.SIGTERM, trainer.global_step, "", VALIDATION_FIRST)
        return []
    return results


def final_test_or_stop(trainer: L.Trainer, *args: Any, **kwargs: Any) -> SignalStop | None:
    """``trainer.test(*args, **kwargs)``: None when it ran to its end, the `SignalStop` when SIGTERM ended it (the
    test's results are then incomplete and not reported). `ckpt_path` (the weights tested) is the stop's checkpoint."""
    try:
        trainer.test(*args, **kwargs)
    except SIGTERMException:
        checkpoint = kwargs.get("ckpt_path") or _last_checkpoint(trainer)
        return SignalStop.of(signal.SIGTERM, trainer.global_step, str(checkpoint), TEST)
    return None


# the libraries whose code holds a lock that an exception raised in the middle of it would never release
LOCK_HOLDERS = ("logging", "threading", "queue", "multiprocessing", "concurrent.futures")


def _inside_lock_holders(frame: Any) -> bool:
    """Whether the main thread was interrupted inside one of the `LOCK_HOLDERS`' code (any frame of its stack)."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if any(module == name or module.startswith(f"{name}.") for name in LOCK_HOLDERS):
            return True
        frame = frame.f_back
    return False


@contextmanager
def stop_on_signal(stage: str, signum: int = signal.SIGTERM) -> Iterator[None]:
    """During the block, `signum` raises `StoppedBySignal` at once, naming `stage` (a stage without step
    boundaries to wait for: data preparation). The handler found is restored after; outside the main thread (where
    Python delivers signals) nothing is installed.

    A handler's exception surfaces wherever the main thread happens to be, and some places swallow it (a finalizer
    run by garbage collection, a ``__del__``, a library's broad ``except``): a signal received during the block
    therefore also raises `StoppedBySignal` when the block ends, whatever the block did with the first one. A signal
    that lands inside logging, threading, a queue or multiprocessing raises nothing there (an exception between a
    lock's acquire and release would leave it taken: the next thread to log would hang) and stops the block at
    its end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[SignalStop] = []

    def raise_stop(signum_received: int, frame: Any) -> None:
        received.append(SignalStop.of(signum_received, 0, "", stage))
        if not _inside_lock_holders(frame):
            raise StoppedBySignal(received[-1])
        # raised inside logging (or a lock or queue) it would leave that library's lock taken, and the next thread
        # to log would wait for it forever: the block's end raises it instead, once preparation has come out there

    previous = signal.signal(signum, raise_stop)
    try:
        yield
    except StoppedBySignal:
        raise
    except BaseException as failure:
        if received:  # the signal's exception turned into another one on its way out
            raise StoppedBySignal(received[0]) from failure
        raise
    finally:
        signal.signal(signum, previous)
    if received:  # the signal's exception was swallowed inside the block
        raise StoppedBySignal(received[0])
