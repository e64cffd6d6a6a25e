"""What a multi-process job must agree on before the Trainer (and its process group) exists: which process
prepares the data, and the one run directory every process writes to.

Launchers tell a process its place through the environment: torchrun sets ``RANK``, srun
``SLURM_PROCID`` (also under hydra-submitit-launcher), Lightning's own launcher ``NODE_RANK`` and, for
the processes it starts, ``LOCAL_RANK``.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import Protocol

_GLOBAL_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")  # torchrun, srun, jsrun


class Preparable(Protocol):
    def prepare_data(self) -> None: ...

    def missing_prepared(self) -> list[Path]: ...


def launch_rank() -> int:
    """This process's global rank from the launcher's environment (0 for a plain ``python train.py``).

    Under Lightning's launcher only ``NODE_RANK`` and ``LOCAL_RANK`` are known; the result is then not
    the global rank, but it is 0 exactly for the global rank 0, which is all the callers need.
    """
    for name in _GLOBAL_RANK_VARIABLES:
        if os.environ.get(name, "").strip():
            return _int_variable(name)
    return _int_variable("NODE_RANK") + _int_variable("LOCAL_RANK")


def _int_variable(name: str) -> int:
    value = os.environ.get(name, "0").strip() or "0"
    if not value.isdigit():
        raise ValueError(f"environment variable {name}={value!r} is not a rank (a non-negative integer)")
    return int(value)


def prepare_data_once(datamodule: Preparable, rank: int | None = None, timeout_s: float = 3600.0,
                      poll_s: float = 5.0) -> None:
    """Rank 0 runs ``datamodule.prepare_data()`` (manifests, tokenizer, feature stats: scanning 281k
    LibriSpeech files or training the tokenizer once per job, not once per process); every other rank
    waits up to `timeout_s` for its files, then raises RuntimeError naming what is missing.

    Data prepared beforehand (``recipes/librispeech/run.sh`` stages 0-2) makes the wait instant. Ranks on
    nodes that do not share rank 0's file system time out: prepare on a shared file system.
    """
    rank = launch_rank() if rank is None else rank
    if rank == 0:
        datamodule.prepare_data()
        return
    deadline = time.monotonic() + timeout_s
    while missing := datamodule.missing_prepared():
        if time.monotonic() >= deadline:
            listed = "\n  ".join(map(str, missing))
            raise RuntimeError(
                f"rank {rank}: waited {timeout_s:.0f} s for rank 0 to prepare the data, still missing:\n  {listed}\n"
                "Prepare it before the multi-process job (recipes/librispeech/run.sh --stop-stage 2) on a file "
                "system every node sees.")
        time.sleep(poll_s)


def run_id() -> str:
    """A run directory name shared by all processes of one job: ``ASR_RUN_ID`` when set, else the SLURM job
    (``slurm<job id>[_<array task>][.<srun step>]``), else torchrun's rendezvous id, else the start time (a single process).

    Registered as the ``${run_id:}`` resolver of ``conf/hydra/default.yaml``: with ``${now:}`` alone every
    rank of an srun/torchrun job would name its own directory.
    """
    if os.environ.get("ASR_RUN_ID"):
        return os.environ["ASR_RUN_ID"]
    if os.environ.get("SLURM_JOB_ID"):
        # array task and srun step (shared by the tasks of one srun) keep runs of one allocation apart
        array_task, step = os.environ.get("SLURM_ARRAY_TASK_ID"), os.environ.get("SLURM_STEP_ID")
        return (f"slurm{os.environ['SLURM_JOB_ID']}" + (f"_{array_task}" if array_task else "")
                + (f".{step}" if step and step.isdigit() else ""))
    if os.environ.get("TORCHELASTIC_RUN_ID", "none") != "none":
        return f"torchrun{os.environ['TORCHELASTIC_RUN_ID']}"
    return datetime.now().strftime("%Y-%m-%d_%H-%M-%S")


def register_resolvers() -> None:
    """Registers ``${run_id:}`` for the Hydra configs (idempotent); the recipes call it before ``@hydra.main``."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("run_id"):
        OmegaConf.register_new_resolver("run_id", run_id, use_cache=True)
