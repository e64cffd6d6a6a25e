"""After a Hydra multirun of the training recipe: one row per job (the overrides that set it apart, its best
validation metric, its test WERs, its run directory), printed and written as ``<sweep dir>/summary.tsv``.

Read from the files each job leaves in its directory (``.hydra/overrides.yaml``, ``result.json`` of
`asr_plugin.training.run_result`), not from the job processes: the same table comes out whichever launcher ran
them (in this process, or SLURM jobs on other nodes), and a job that failed is listed as such.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from asr_plugin.files import write_text_atomic
from asr_plugin.line_fields import line_field
from asr_plugin.training.run_result import read_run_result

SUMMARY_FILE = "summary.tsv"
OVERRIDES_FILE = Path(".hydra") / "overrides.yaml"


@dataclass(frozen=True)
class SweepJob:
    """One job of a sweep: its subdirectory, the overrides Hydra ran it with, and its result (None: it wrote
    none, it failed or has not ended)."""

    directory: Path
    overrides: tuple[str, ...]
    result: dict[str, Any] | None


def _overrides(path: Path) -> tuple[str, ...]:
    overrides = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(overrides, list) or not all(isinstance(item, str) for item in overrides):
        raise ValueError(f"{path}: expected a list of Hydra overrides, got {overrides!r}")
    return tuple(overrides)


def _job_order(directory: Path) -> tuple[int, int, str]:
    """Numbered job directories by number (10 after 9), then any others by name."""
    return (0, int(directory.name), "") if directory.name.isdigit() else (1, 0, directory.name)


def shared_overrides(jobs: list[SweepJob]) -> set[str]:
    """The overrides every job of a sweep of several has (none for a single job: it is set apart by all)."""
    return set.intersection(*(set(job.overrides) for job in jobs)) if len(jobs) > 1 else set()


def sweep_jobs(sweep_dir: str | os.PathLike) -> list[SweepJob]:
    """Every job directory under `sweep_dir` (a subdirectory holding ``.hydra/overrides.yaml``), by job number."""
    directories = sorted((p.parent.parent for p in Path(sweep_dir).glob(f"*/{OVERRIDES_FILE}")), key=_job_order)
    return [SweepJob(d, _overrides(d / OVERRIDES_FILE), read_run_result(d)) for d in directories]


def _status(result: dict[str, Any] | None) -> str:
    if result is None:
        return "no result.json (failed or not ended)"
    stop = result.get("stop")
    return f"stopped by signal {stop.get('signal')} at step {stop.get('step')}" if stop else "done"


def _number(value: Any) -> str:
    return "" if value is None else f"{float(value):.4f}"


def summary_rows(jobs: list[SweepJob]) -> list[list[str]]:
    """The table, header first: job, the overrides not shared by every job, status, the best value of the metric
    the checkpoints are ranked by (``val/wer`` in this recipe), each test set's WER (``test/<set>/wer``, as
    metrics.csv names them; fractions), run directory."""
    shared = shared_overrides(jobs)
    results = [job.result or {} for job in jobs]
    monitors = sorted({result["monitor"] for result in results if result.get("monitor")})
    tests = sorted({key for result in results for key in result.get("metrics", {}) if key.startswith("test")})
    tests = [key for key in tests if key.endswith("/wer")]
    header = ["job", "overrides", "status", *(f"best {monitor}" for monitor in monitors), *tests, "run directory"]
    rows = [header]
    for job, result in zip(jobs, results):
        best = [_number(result.get("best_model_score")) if result.get("monitor") == m else "" for m in monitors]
        metrics = result.get("metrics", {})
        rows.append(
            [
                job.directory.name,
                " ".join(override for override in job.overrides if override not in shared),
                _status(job.result),
                *best,
                *(_number(metrics.get(key)) for key in tests),
                str(result.get("output_dir", job.directory)),
            ]
        )
    return rows


def aligned(rows: list[list[str]]) -> str:
    """`rows` as text columns padded to their widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n" for row in rows)


def write_summary(sweep_dir: str | os.PathLike) -> tuple[Path, str] | None:
    """Writes ``<sweep_dir>/summary.tsv`` of its jobs and returns (its path, the table as aligned text); None
    when the directory holds no job."""
    jobs = sweep_jobs(sweep_dir)
    if not jobs:
        return None
    rows = summary_rows(jobs)
    shared = sorted(shared_overrides(jobs))
    path = write_text_atomic(
        Path(sweep_dir) / SUMMARY_FILE, "".join("\t".join(map(line_field, row)) + "\n" for row in rows)
    )
    common = f"every job: {' '.join(shared)}\n" if shared else ""
    return path, common + aligned(rows)


class SweepSummary(Callback):
    """Hydra callback (``conf/hydra/train.yaml``): at the end of a multirun, prints its summary table and where
    ``summary.tsv`` went."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        written = write_summary(str(config.hydra.sweep.dir))
        if written is not None:
            path, table = written
            print(f"sweep summary ({path}):\n{table}", end="", flush=True)
