"""``ckpt_path``: the checkpoint a run resumes from (null, "last" or a file).

A run's lineage is its run directory. A job with an id (``ASR_RUN_ID``, a SLURM job, a torchrun rendezvous:
`job_run_id`) or with a directory of its own (``hydra.run.dir=...``, as ``run.sh`` stage 3 gives it) finds
the same directory every time it starts: "last" is the newest good checkpoint there (one that reads, matches its
content hash and holds finite weights and optimizer state: a damaged or diverged newer one is passed over, named), a
first start finds none and trains from scratch, so a requeued job can pass ``ckpt_path=last`` from its first start,
and a directory whose every checkpoint is damaged is refused naming them (never a silent restart from step 0).

A plain local run (none of those) gets a new directory under ``paths.runs_dir`` each time, named by its
start time, which holds no checkpoint: "last" there is the ``last.ckpt`` of the newest earlier run of the
same task whose composed config (``.hydra/config.yaml``) is this run's, ``ckpt_path`` aside. Training goes on
in the new directory (the earlier one keeps its checkpoints). Without such a run it refuses, naming the runs
that have a ``last.ckpt`` and how their configs differ: never a silent start from scratch.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from asr_plugin.formats import read_resumable_checkpoint
from asr_plugin.formats.nemo.plain_config import check_expanded_size, load_yaml_data
from asr_plugin.training.distributed import job_run_id
from asr_plugin.training.resume_checks import config_differences

log = logging.getLogger(__name__)

# Keys that differ between a run and its resumption by design.
RESUME_KEYS = ("ckpt_path", "paths.output_dir")
SHOWN_RUNS = 5  # runs listed when "last" is refused
SHOWN_DIFFERENCES = 3  # config differences listed per run
# A composed train config holds a few hundred nodes; a sibling's past this is no run config (an alias bomb).
MAX_RUN_CONFIG_NODES = 100_000


def resolve_ckpt_path(cfg: DictConfig, trainer: L.Trainer) -> str | None:
    """Turns ``cfg.ckpt_path`` into a checkpoint file for ``Trainer.fit`` (None: from scratch).

    "last": the newest good ``*.ckpt`` of this run's checkpoint directories or Lightning's SLURM requeue
    checkpoints (``hpc_ckpt_<n>.ckpt`` in the run directory; files that do not read, do not match their
    content hash or hold NaN or infinite weights or optimizer state are skipped with a warning naming them; when
    every one is, ValueError naming them); else, for a plain local run, `previous_run_checkpoint`; else ValueError for a job of a plain
    multirun whose sweep directory holds no checkpoint (it is new); else None with a warning (a job's first start). Any other
    value must be a good training checkpoint file (ValueError naming it and why otherwise: a ``.nemo`` or a state
    dict is pointed to the ``+finetune`` preset that starts a run from it).
    """
    ckpt_path = cfg.get("ckpt_path")
    if ckpt_path is None:
        return None
    if ckpt_path != "last":
        try:
            read_resumable_checkpoint(ckpt_path)  # missing, empty, truncated, damaged, NaN, a .nemo: which and why
        except ValueError as err:
            raise ValueError(f"ckpt_path: {err}") from None
        return str(ckpt_path)
    directories = list(
        dict.fromkeys(Path(cb.dirpath) for cb in trainer.checkpoint_callbacks if getattr(cb, "dirpath", None))
    )
    # hidden files are partial writes of a killed run (the temporary names of asr_plugin.files)
    found = [path for directory in directories for path in directory.glob("*.ckpt") if not path.name.startswith(".")]
    found += list(Path(trainer.default_root_dir).glob("hpc_ckpt_*.ckpt"))
    unusable = []
    for path in sorted(set(found), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            read_resumable_checkpoint(path)
        except ValueError as err:
            log.warning("ckpt_path=last: skipping %s", err)
            unusable.append(path)
            continue
        log.info("ckpt_path=last resumes from %s", path)
        return str(path)
    if unusable:  # not a first start: training from scratch would overwrite them at its first checkpoint
        raise ValueError(
            f"ckpt_path=last: every checkpoint of this run is damaged or diverged ({', '.join(map(str, unusable))}; "
            "why: the warnings above), so nothing is resumed. To train this run again from step 0, move them "
            "away and run without ckpt_path=last; or give ckpt_path=<a good checkpoint>"
        )
    run_dir = Path(cfg.paths.output_dir)
    runs_dir = OmegaConf.select(cfg, "paths.runs_dir")
    if job_run_id() is None and runs_dir and run_dir.resolve().parent == Path(runs_dir).resolve():
        here = run_dir.resolve()
        subdirs = [d.resolve().relative_to(here) for d in directories if d.resolve().is_relative_to(here)]
        return str(
            previous_run_checkpoint(Path(runs_dir), run_dir, subdirs, OmegaConf.to_container(cfg, resolve=False))
        )
    # a sweep directory without any job's checkpoint is new (a rerun of a sweep has its other jobs' checkpoints)
    if job_run_id() is None and is_multirun_job() and next(run_dir.parent.rglob("*.ckpt"), None) is None:
        raise ValueError(
            f"ckpt_path=last: this multirun's directory {run_dir.parent} is new (a plain multirun's is "
            "named by its start time) and holds no checkpoint: set ASR_RUN_ID=<the name of the earlier "
            "multirun's directory> to resume each of its jobs from its own, or drop ckpt_path=last"
        )
    where = ", ".join(str(d) for d in dict.fromkeys([*directories, Path(trainer.default_root_dir)]))
    log.warning("ckpt_path=last: no readable checkpoint of this run in %s; training from scratch", where)
    return None


def is_multirun_job() -> bool:
    """Whether this process runs a job of a Hydra multirun (``-m``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def previous_run_checkpoint(
    runs_dir: Path, run_dir: Path, checkpoint_subdirs: list[Path], config: dict[str, Any]
) -> Path:
    """The ``<run>/<subdir>/last.ckpt`` of the newest run under `runs_dir` (other than `run_dir`, this run's)
    whose ``.hydra/config.yaml`` equals `config` (this run's config, unresolved) but for `RESUME_KEYS`; newest
    by the checkpoint's modification time. Checkpoints that are not good (see `resolve_ckpt_path`) are skipped
    with a warning.

    Raises:
        ValueError: no such run; it names the runs that have a ``last.ckpt`` and the keys where they differ.
    """
    here = without_resume_keys(config)
    runs = [run for run in runs_dir.iterdir() if run.is_dir() and run.resolve() != run_dir.resolve()]
    candidates = [(run, run / subdir / "last.ckpt") for run in runs for subdir in checkpoint_subdirs]
    candidates = sorted(
        ((run, path) for run, path in candidates if path.is_file()),
        key=lambda candidate: candidate[1].stat().st_mtime,
        reverse=True,
    )
    refused: list[tuple[Path, list[str]]] = []
    for run, path in candidates:
        differences = run_config_differences(here, run)
        if not differences:
            try:
                checkpoint = read_resumable_checkpoint(path)
            except ValueError as err:
                log.warning("ckpt_path=last: skipping %s", err)
                differences = [str(err)]
        if differences:
            refused.append((path, differences))
            continue
        log.info(
            "ckpt_path=last: this run's directory %s is new; resuming %s (epoch %s, step %s), the newest run "
            "under %s with this config; training goes on in this run's directory",
            run_dir,
            path,
            checkpoint.get("epoch"),
            checkpoint.get("global_step"),
            runs_dir,
        )
        return path
    start = (
        f"ckpt_path=last: this run's directory {run_dir} is new (a plain run's directory is named by its start "
        f"time) and no earlier run under {runs_dir} with this config has a last.ckpt"
    )
    if not refused:
        raise ValueError(
            f"{start}, nor does any other run there. Drop ckpt_path=last to train from scratch, or give "
            "ckpt_path=<a checkpoint file>."
        )
    listed = "\n".join(
        f"  {path}: {'; '.join(differences[:SHOWN_DIFFERENCES])}"
        + (f" (and {len(differences) - SHOWN_DIFFERENCES} more)" if len(differences) > SHOWN_DIFFERENCES else "")
        for path, differences in refused[:SHOWN_RUNS]
    )
    more = f"\n  ... and {len(refused) - SHOWN_RUNS} more" if len(refused) > SHOWN_RUNS else ""
    raise ValueError(
        f"{start}. The runs that have one, newest first, and how they differ:\n{listed}{more}\n"
        "Resume one with ckpt_path=<its last.ckpt> (and its settings), or drop ckpt_path=last to train "
        "from scratch."
    )


def run_config_differences(here: dict[str, Any], run: Path) -> list[str]:
    """How the config of the run directory `run` (its ``.hydra/config.yaml``) differs from `here`."""
    saved = run / ".hydra" / "config.yaml"
    if not saved.is_file():
        return [f"no {saved.relative_to(run)} (not a run of recipes/*/train.py)"]
    try:
        there = read_run_config(saved, str(saved.relative_to(run)))
    except ValueError as err:
        return [str(err)]
    if not isinstance(there, dict):
        return [f"{saved.relative_to(run)} is not a mapping"]
    return config_differences(here, without_resume_keys(there), "", where="in its config")


def read_run_config(path: Path, source: str) -> Any:
    """A run's saved config as plain data, interpolations unresolved. Its YAML is read by the node-counted reader
    of ``.nemo`` configs first (`check_expanded_size`), so a few kB of nested aliases is refused at once instead
    of expanding in OmegaConf. ValueError naming `source` and why it is unusable."""

    def unreadable(err: BaseException) -> ValueError:
        return ValueError(f"{source} is unreadable ({type(err).__name__}: {str(err).splitlines()[0][:200]})")

    try:
        text = path.read_text(encoding="utf-8")
        data = load_yaml_data(text, source)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise unreadable(err) from None
    if isinstance(data, Mapping):
        check_expanded_size(data, source, MAX_RUN_CONFIG_NODES)
    try:
        return OmegaConf.to_container(OmegaConf.create(text), resolve=False)
    except (yaml.YAMLError, OmegaConfBaseException) as err:
        raise unreadable(err) from None


def without_resume_keys(config: dict[str, Any]) -> dict[str, Any]:
    """`config` without `RESUME_KEYS` (a copy)."""
    config = copy.deepcopy(config)
    for key in RESUME_KEYS:
        *parents, leaf = key.split(".")
        node = config
        for parent in parents:
            node = node.get(parent) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return config
