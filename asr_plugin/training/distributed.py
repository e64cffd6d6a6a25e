"""What a multi-process job must agree on before the Trainer (and its process group) exists: which process
prepares the data, and the one run directory every process writes to.

Launchers tell a process its place through the environment: torchrun sets ``RANK``, srun
``SLURM_PROCID`` (also under hydra-submitit-launcher), Lightning's own launcher ``NODE_RANK`` and, for
the processes it starts, ``LOCAL_RANK``.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Protocol

from asr_plugin.data.preparation.pipeline import (
    clear_preparation_failure,
    preparation_failure_of,
    record_preparation_failure,
)

log = logging.getLogger(__name__)

_GLOBAL_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")  # torchrun, srun, jsrun


class Preparable(Protocol):
    prepare_timeout_s: float
    preparation_failure: Path

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


def prepare_data_once(
    datamodule: Preparable,
    rank: int | None = None,
    timeout_s: float | None = None,
    poll_s: float = 5.0,
    report_s: float = 60.0,
) -> None:
    """Rank 0 runs ``datamodule.prepare_data()`` (manifests, tokenizer, feature stats: scanning 281k
    LibriSpeech files or training the tokenizer once per job, not once per process); every other rank
    waits for the files of ``datamodule.missing_prepared()``, saying every `report_s` seconds which ones.

    A waiting rank stops with RuntimeError when rank 0 recorded a failure for this job (the record at
    ``datamodule.preparation_failure`` carries rank 0's error and `run_id()`, which srun, torchrun and
    ``ASR_RUN_ID`` make the same for every process of a job; where it differs the rank cannot tell, and
    waits) or after `timeout_s` (None: ``datamodule.prepare_timeout_s``, the config's
    ``data.prepare_timeout_s``), naming what is still missing.

    Data prepared beforehand (``recipes/librispeech/run.sh`` stages 0-2) makes the wait instant. Ranks on
    nodes that do not share rank 0's file system time out: prepare into a ``data.work_dir`` every node sees.
    """
    rank = launch_rank() if rank is None else rank
    job = run_id()
    if rank == 0:
        clear_preparation_failure(datamodule.preparation_failure)
        try:
            datamodule.prepare_data()
        except BaseException as error:
            record_preparation_failure(datamodule.preparation_failure, job, error)
            raise
        return
    timeout_s = datamodule.prepare_timeout_s if timeout_s is None else timeout_s
    start = time.monotonic()
    next_report = start
    while missing := datamodule.missing_prepared():
        waited = time.monotonic() - start
        listed = "\n  ".join(map(str, missing))
        if (failure := preparation_failure_of(datamodule.preparation_failure, job)) is not None:
            raise RuntimeError(
                f"rank {rank}: rank 0 failed to prepare the data ({failure}); still missing:\n  {listed}"
            )
        if waited >= timeout_s:
            raise RuntimeError(
                f"rank {rank}: waited {waited:.0f} s (data.prepare_timeout_s={timeout_s:g}) for rank 0 to prepare "
                f"the data, still missing:\n  {listed}\nPrepare it before the multi-process job "
                "(recipes/librispeech/run.sh --stop-stage 2, or scripts/prepare_data.py) into a data.work_dir "
                "every node sees."
            )
        if time.monotonic() >= next_report:
            log.info(
                "rank %d: waiting %.0f s of %g s for rank 0 to prepare %d file(s):\n  %s",
                rank,
                waited,
                timeout_s,
                len(missing),
                listed,
            )
            next_report += report_s
        time.sleep(poll_s)


def run_id(parent: str | os.PathLike | None = None) -> str:
    """A run directory name shared by all processes of one job: ``ASR_RUN_ID`` when set, else the SLURM job
    (``slurm<job id>[_<array task>][.<srun step>]``), else torchrun's rendezvous id, else the start time.

    The first three name a job (a requeued SLURM job keeps its id, hence its directory). The start time is
    only for a single process, and it is made unique under `parent` (the directory the runs go into): the
    directory is created exclusively, with a ``_1``, ``_2``... suffix when another run took that second.
    Processes of one job that share none of the ids (torchrun without ``--rdzv-id``, Lightning's multi-node
    launcher without ``ASR_RUN_ID``) would each name another directory: refused, saying what to set.

    Registered as the ``${run_id:<parent>}`` resolver of ``conf/hydra/default.yaml`` (cached, so a run
    resolves it once): with ``${now:}`` alone every rank of an srun/torchrun job would name its own directory.
    """
    job = job_run_id()
    if job is not None:
        return job
    # (Lightning's launcher on one node passes its run directory to the processes it starts: not a conflict)
    torchrun_without_id = "TORCHELASTIC_RUN_ID" in os.environ and _int_variable("WORLD_SIZE") > 1
    if torchrun_without_id or _int_variable("NODE_RANK") > 0:
        raise RuntimeError(
            f"WORLD_SIZE={os.environ.get('WORLD_SIZE', '')!r}, NODE_RANK={os.environ.get('NODE_RANK', '')!r}: the "
            "processes of this job share no job id to name their one run directory; set ASR_RUN_ID to the same "
            "value for all of them (or give torchrun --rdzv-id)"
        )
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return stamp if parent is None else reserve_run_dir(parent, stamp)


def job_run_id() -> str | None:
    """The run directory name a launcher's job id gives (see `run_id`), or None for a plain local run, whose
    directory is named by its start time: ``ASR_RUN_ID``, else ``slurm<job id>[_<array task>][.<srun step>]``,
    else ``torchrun<rendezvous id>``. A job with one resumes in the directory of that id (its lineage)."""
    if os.environ.get("ASR_RUN_ID"):
        return os.environ["ASR_RUN_ID"]
    if os.environ.get("SLURM_JOB_ID"):
        # array task and srun step (shared by the tasks of one srun) keep runs of one allocation apart
        array_task, step = os.environ.get("SLURM_ARRAY_TASK_ID"), os.environ.get("SLURM_STEP_ID")
        return (
            f"slurm{os.environ['SLURM_JOB_ID']}"
            + (f"_{array_task}" if array_task else "")
            + (f".{step}" if step and step.isdigit() else "")
        )
    if os.environ.get("TORCHELASTIC_RUN_ID", "none") != "none":
        return f"torchrun{os.environ['TORCHELASTIC_RUN_ID']}"
    return None


def reserve_run_dir(parent: str | os.PathLike, name: str) -> str:
    """Creates ``parent/name`` exclusively (``parent/name_1``, ``_2``, ... when taken); returns the name used.

    ``mkdir`` either creates the directory or fails, on every POSIX file system, so two runs started in the
    same second never share one.
    """
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(10_000):
        candidate = name if attempt == 0 else f"{name}_{attempt}"
        try:
            (parent / candidate).mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RuntimeError(f"{parent}: {name} and 10000 suffixed names are taken")


def slurm_layout() -> tuple[int, int] | None:
    """(tasks per node, nodes) of the SLURM job this process is a task of (srun, or sbatch through submitit),
    or None outside SLURM (and in ``--job-name=bash``/``interactive`` allocations, as Lightning decides).

    Lightning runs one process per device: this is what ``trainer.devices`` and ``trainer.num_nodes`` must be,
    so the job's layout is set once, in ``#SBATCH`` lines or ``hydra.launcher.{tasks_per_node,nodes}``.
    """
    from lightning.fabric.plugins.environments import SLURMEnvironment

    if not SLURMEnvironment.detect():
        return None
    nodes = _int_variable("SLURM_JOB_NUM_NODES") or _int_variable("SLURM_NNODES") or 1
    per_node = os.environ.get("SLURM_NTASKS_PER_NODE", "").strip()
    tasks = int(per_node) if per_node.isdigit() else max(1, _int_variable("SLURM_NTASKS") // nodes)
    return tasks, nodes


def register_resolvers() -> None:
    """Registers ``${run_id:<parent>}`` for the Hydra configs (idempotent); the recipes call it before ``@hydra.main``."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("run_id"):
        OmegaConf.register_new_resolver("run_id", run_id, use_cache=True)
