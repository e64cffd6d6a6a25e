"""SLURM's requeue signal handled at an optimizer-step boundary, and the job's layout as the Trainer's
(`slurm_callbacks`: what ``train(cfg)`` asks for under SLURM).

Lightning's own handler (``SLURMEnvironment(auto_requeue=True)``) writes ``hpc_ckpt_<n>.ckpt`` from inside
the signal handler, wherever the signal lands: mid-forward or mid-backward the checkpoint records a batch
as started but not finished, and the job resumed from it trains one batch more than its step count says
(observed: steps 4-6 logged for a resume from step 4 to step 6). Here the handler only records that the
signal came; the checkpoint is written and ``scontrol requeue`` run at the end of the next training batch,
the point where Lightning's own step checkpoints are taken and from which it resumes exactly.

Under DDP every rank must write the checkpoint at the same step (``save_checkpoint`` is collective), and
the signal reaches the ranks at slightly different moments. Each rank all-reduces its flag asynchronously
at every batch end and reads the sum one batch later, when the collective is long done: no barrier, no
stall, and all ranks act on the same step's verdict, one step after the signal. SLURM sends the signal
minutes before the time limit (``--signal=USR1@300``), so one step later costs nothing.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from omegaconf import DictConfig, open_dict

from asr_plugin.training.distributed import slurm_layout

log = logging.getLogger(__name__)


class AgreedFlag:
    """A boolean of every rank, OR-ed across ranks by an asynchronous all-reduce started now and read by
    `any()` later; on CUDA the sum is copied to pinned host memory behind an event, so reading it one step
    later does not stall the GPU's queue."""

    def __init__(self, value: bool, device: torch.device) -> None:
        self.tensor = torch.full((), float(value), device=device)  # a fill kernel: no host-to-device copy
        self.work = dist.all_reduce(self.tensor, async_op=True)
        self.event = None
        if self.tensor.is_cuda:
            self.work.wait()  # on CUDA: the current stream waits for the collective; the host does not
            self.host = torch.empty((), pin_memory=True)
            self.host.copy_(self.tensor, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()

    def any(self) -> bool:
        if self.event is not None:
            self.event.synchronize()
            return bool(self.host.item() > 0)
        self.work.wait()
        return bool(self.tensor.item() > 0)


def slurm_job_id() -> str:
    """The id ``scontrol requeue`` takes: ``<array job>_<task>`` for an array task, else ``SLURM_JOB_ID``."""
    array_job = os.environ.get("SLURM_ARRAY_JOB_ID")
    job = f"{array_job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if array_job else os.environ["SLURM_JOB_ID"]
    if not re.fullmatch(r"[0-9_]+", job):
        raise ValueError(f"SLURM job id {job!r} is not a number (SLURM_JOB_ID / SLURM_ARRAY_*)")
    return job


def next_requeue_checkpoint(run_dir: str | os.PathLike) -> Path:
    """``hpc_ckpt_<n+1>.ckpt`` in `run_dir`, the name Lightning gives its requeue checkpoints (and that
    ``ckpt_path=last`` looks for)."""
    numbers = [
        int(m.group(1))
        for p in Path(run_dir).glob("hpc_ckpt_*.ckpt")
        if (m := re.fullmatch(r"hpc_ckpt_(\d+)\.ckpt", p.name))
    ]
    return Path(run_dir) / f"hpc_ckpt_{max(numbers, default=0) + 1}.ckpt"


class StepBoundarySignal(L.Callback):
    """On `signum`: at the end of the next optimizer step (one later under DDP, as every rank agrees; with
    gradient accumulation, at the end of a step's last batch) call `act`. The handler only records the signal.

    It is installed at ``setup``, before Lightning installs its handlers (so Lightning keeps out of SIGUSR1), and
    again at ``on_train_start`` where Lightning replaced it (it always installs its own SIGTERM handler, which
    would stop the run mid-accumulation); the handler found first is restored at ``teardown``."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.requested = False
        self._pending: AgreedFlag | None = None
        self._previous_handler: Any = None

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.requested = True  # nothing else here: the signal may land anywhere in a step

    def _install(self) -> None:
        if (
            threading.current_thread() is not threading.main_thread()
            or signal.getsignal(self.signum) == self._on_signal
        ):
            return
        previous = signal.signal(self.signum, self._on_signal)
        if self._previous_handler is None:
            self._previous_handler = previous

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit":
            self._install()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._install()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._previous_handler is not None:
            signal.signal(self.signum, self._previous_handler)
            self._previous_handler = None

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if (batch_idx + 1) % trainer.accumulate_grad_batches:  # mid-accumulation: not an optimizer-step boundary
            return
        if trainer.world_size == 1 or not dist.is_initialized():
            if self.requested:
                self.requested = False
                self.act(trainer)
            return
        agreed = self._pending is not None and self._pending.any()  # the previous batch's verdict
        self._pending = AgreedFlag(self.requested and not agreed, pl_module.device)
        if agreed:
            self.requested = False
            self.act(trainer)

    def act(self, trainer: L.Trainer) -> None:
        """What the signal asks for, at the step boundary every rank agreed on."""
        raise NotImplementedError


class StepBoundaryRequeue(StepBoundarySignal):
    """On `signum` (SLURM's requeue signal, SIGUSR1), at a step boundary (`StepBoundarySignal`): write
    ``hpc_ckpt_<n>.ckpt`` in the run directory and, on rank 0, ask SLURM to requeue the job."""

    def __init__(self, signum: int = signal.SIGUSR1) -> None:
        super().__init__(signum)

    def act(self, trainer: L.Trainer) -> None:
        self.requeue(trainer)

    def requeue(self, trainer: L.Trainer) -> None:
        """Writes the requeue checkpoint (every rank) and runs ``scontrol requeue`` (rank 0)."""
        path = next_requeue_checkpoint(trainer.default_root_dir)
        trainer.save_checkpoint(path)
        if not trainer.is_global_zero:
            return
        job = slurm_job_id()
        result = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
        if result.returncode == 0:
            log.info("wrote %s at step %d; SLURM job %s requeued", path, trainer.global_step, job)
        else:
            log.warning(
                "wrote %s at step %d; `scontrol requeue %s` failed (%d): %s",
                path,
                trainer.global_step,
                job,
                result.returncode,
                result.stderr.strip(),
            )


def apply_slurm_layout(trainer_cfg: DictConfig) -> None:
    """Under SLURM, sets ``trainer.devices`` and ``trainer.num_nodes`` from the job's tasks per node and nodes
    (one process per device), so the layout is set in one place; a different explicit value is an error."""
    layout = slurm_layout()
    if layout is None:
        return
    tasks, nodes = layout
    for key, wanted, defaults, variable in (
        ("devices", tasks, (-1, "auto", None), "tasks per node"),
        ("num_nodes", nodes, (1, None), "nodes"),
    ):
        value = trainer_cfg.get(key)
        if value not in (*defaults, wanted):
            raise ValueError(
                f"trainer.{key}={value!r} but this SLURM job has {wanted} {variable} (Lightning runs "
                f"one task per device): drop trainer.{key}, SLURM's layout sets it"
            )
        with open_dict(trainer_cfg):
            trainer_cfg[key] = wanted


def slurm_callbacks(trainer_cfg: DictConfig) -> list[L.Callback]:
    """Under SLURM: the job's layout set in `trainer_cfg` (`apply_slurm_layout`) and the requeue signal handled
    at a step boundary, not mid-step as Lightning's own handler does (`StepBoundaryRequeue`); [] elsewhere."""
    apply_slurm_layout(trainer_cfg)
    return [StepBoundaryRequeue()] if slurm_layout() is not None else []
