"""SIGTERM (what a scheduler, ``docker stop`` or ``kill`` sends) stops training at an optimizer-step boundary with
a checkpoint, like SLURM's requeue signal (`asr_plugin.training.slurm_requeue`).

Lightning's own SIGTERM handler stops the fit loop at the end of the batch it lands in (mid-accumulation too),
writes nothing and leaves the process to exit with status 0, so a script that runs evaluation next goes on with a
half-trained model. Here the signal is recorded; at the next step boundary every rank writes
``hpc_ckpt_<n>.ckpt`` in the run directory (what ``ckpt_path=last`` resumes from) and the fit ends with
`StoppedBySignal`, which ``train`` turns into its summary's ``stop`` entry; the recipe then exits with
128 + the signal's number (143), as a process killed by SIGTERM would.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from typing import Any

import lightning as L

from asr_plugin.training.slurm_requeue import StepBoundarySignal, next_requeue_checkpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SignalStop:
    """Why and where a run stopped early: the signal's name, the exit status the recipe ends with, the global
    step of the checkpoint and its path."""

    signal: str
    exit_status: int
    step: int
    checkpoint: str


class StoppedBySignal(Exception):
    """Raised at the step boundary after the stop checkpoint is written; ends ``Trainer.fit``."""

    def __init__(self, stop: SignalStop) -> None:
        super().__init__(f"stopped by {stop.signal} at step {stop.step}")
        self.stop = stop


class StepBoundaryStop(StepBoundarySignal):
    """On `signum` (SIGTERM): forwards it to the ranks Lightning launched as subprocesses (as Lightning's own
    handler does), then at the next step boundary writes the stop checkpoint and raises `StoppedBySignal`."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self._launcher: Any = None

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
        stop = SignalStop(signal.Signals(self.signum).name, 128 + self.signum, trainer.global_step, str(path))
        log.warning("%s received: wrote %s at step %d; stopping", stop.signal, path, stop.step)
        raise StoppedBySignal(stop)


def fit_or_stop(trainer: L.Trainer, stopper: StepBoundaryStop, *args: Any, **kwargs: Any) -> SignalStop | None:
    """``trainer.fit(*args, **kwargs)``; the `SignalStop` when `stopper`'s signal ended it, None when it ran to
    its end. A signal that came after the last step (during the last validation) found no step boundary: the
    run is complete and its last checkpoint is the stop's."""
    try:
        trainer.fit(*args, **kwargs)
    except StoppedBySignal as stopped:
        return stopped.stop
    if not stopper.requested:
        return None
    last = next((cb.last_model_path for cb in trainer.checkpoint_callbacks if getattr(cb, "last_model_path", "")), "")
    return SignalStop(signal.Signals(stopper.signum).name, 128 + stopper.signum, trainer.global_step, last)
