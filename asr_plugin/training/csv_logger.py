"""``metrics.csv`` that is never lost: Lightning's ``CSVLogger`` with a writer that keeps earlier rows and
replaces the file atomically.

Lightning's writer deletes an existing ``metrics.csv`` when a run directory is reused (a requeued or resumed
job: the steps before the checkpoint disappear from the curves), rewrites it in place when a new column
appears, and by default writes every 100 steps, so a job killed (by SLURM, a dead DDP peer, the OOM killer)
before that leaves nothing. This writer reads the rows already there, drops those of the steps the resumed
run is about to redo, and writes the whole table to a temporary file that is renamed onto ``metrics.csv``
(``asr_plugin.files``) at every flush; ``conf/logger/csv.yaml`` flushes at every logging step.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.core.saving import save_hparams_to_yaml
from lightning.pytorch.loggers import CSVLogger

from asr_plugin.files import write_atomic, write_text_atomic


class DurableMetricsWriter:
    """The experiment object of :class:`DurableCSVLogger` (``log_metrics``, ``save``, ``log_hparams``)."""

    NAME_METRICS_FILE = "metrics.csv"
    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.metrics_file_path = os.path.join(log_dir, self.NAME_METRICS_FILE)
        os.makedirs(log_dir, exist_ok=True)
        self.earlier: list[dict[str, Any]] = []  # rows of an earlier session in this directory
        if os.path.isfile(self.metrics_file_path):
            with open(self.metrics_file_path, newline="", encoding="utf-8") as handle:
                self.earlier = [{k: v for k, v in row.items() if v != ""} for row in csv.DictReader(handle)]
        self.rows: list[dict[str, Any]] = []  # this session's
        self.metrics: list[dict[str, Any]] = []  # logged, not yet written
        self.hparams: dict[str, Any] = {}

    def log_metrics(self, metrics_dict: dict[str, Any], step: int | None = None) -> None:
        """Records one row (tensors become numbers)."""
        row = {k: v.item() if hasattr(v, "item") else v for k, v in metrics_dict.items()}
        row["step"] = len(self.rows) + len(self.metrics) if step is None else step
        self.metrics.append(row)

    def save(self) -> None:
        """Writes every row so far (earlier session's first, minus the steps this one logged again) atomically."""
        if not self.metrics:
            return
        if not self.rows:  # the first rows of this session: a resumed run redoes the steps after its checkpoint
            first = min(int(row["step"]) for row in self.metrics)
            self.earlier = [row for row in self.earlier if int(row.get("step", -1)) < first]
        self.rows += self.metrics
        self.metrics = []
        rows = self.earlier + self.rows
        columns = sorted(set().union(*rows))
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
        write_text_atomic(self.metrics_file_path, text.getvalue())

    def log_hparams(self, params: dict[str, Any]) -> None:
        """Records hyper-parameters in ``hparams.yaml`` (atomically)."""
        self.hparams.update(params)
        write_atomic(
            os.path.join(self.log_dir, self.NAME_HPARAMS_FILE), lambda tmp: save_hparams_to_yaml(tmp, self.hparams)
        )


class DurableCSVLogger(CSVLogger):
    """``lightning.pytorch.loggers.CSVLogger`` (same arguments and layout) with :class:`DurableMetricsWriter`."""

    @property
    @rank_zero_experiment
    def experiment(self) -> DurableMetricsWriter:
        if self._experiment is None:
            self._experiment = DurableMetricsWriter(self.log_dir)
        return self._experiment
