"""``python -m gpucheck``: the GPU check (or, with ``--dry-run``, its stages at CPU sizes).

    python -m gpucheck --out "$OUT"              # on the GPU machine: 9 minutes at most
    python -m gpucheck --dry-run --out /tmp/dry   # here: the same structure, tiny shapes, CPU
    python -m gpucheck --list                     # the stages, their limits and commands

The output folder (default ``$OUT`` when set, else ``benchmarks/results/gpu_check_<time>``) receives
summary.txt, summary.json, results.tar.gz (and traces.tar) after every stage; the stage directories
themselves go to ``--work-dir`` (default ``benchmarks/results/gpu_check_<time>/stages``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

from gpucheck.plan import CPU_TOTAL_S, GPU_TOTAL_S, cpu_stages, gpu_stages
from gpucheck.stages import Stage, all_as_expected, run_stages

REPO_ROOT = Path(__file__).resolve().parents[2]


def _output(command: list[str]) -> str:
    """A command's stripped stdout, or 'unknown' when it cannot run (no git, no nvidia-smi)."""
    try:
        return (
            subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=REPO_ROOT).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_meta(dry_run: bool) -> dict:
    """What the summary's header records; the GPU is read through nvidia-smi, so this process never
    creates a CUDA context (it would hold device memory through every stage)."""
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "dry run (CPU sizes)" if dry_run else "GPU check",
        "host": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs)",
        "python": sys.version.split()[0],
        "commit": _output(["git", "rev-parse", "--short", "HEAD"]),
        "uncommitted changes": "yes" if _output(["git", "status", "--porcelain"]) not in ("", "unknown") else "no",
    }
    if not dry_run:
        meta["gpu"] = _output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    return meta


def select(stages: list[Stage], names: str | None) -> list[Stage]:
    """The stages named (comma-separated, kept in plan order); prerequisites outside the selection are dropped."""
    if not names:
        return stages
    wanted = names.split(",")
    unknown = sorted(set(wanted) - {stage.name for stage in stages})
    if unknown:
        raise ValueError(f"--stages: unknown stage(s) {unknown}; the stages are {[stage.name for stage in stages]}")
    chosen = [stage for stage in stages if stage.name in wanted]
    kept = {stage.name for stage in chosen}
    return [dataclasses.replace(stage, needs=tuple(n for n in stage.needs if n in kept)) for stage in chosen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpucheck", description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU sizes, no GPU needed")
    parser.add_argument(
        "--out", type=Path, help="output folder (default: $OUT, else benchmarks/results/gpu_check_<time>)"
    )
    parser.add_argument(
        "--work-dir", type=Path, help="stage directories (default: benchmarks/results/gpu_check_<time>/stages)"
    )
    parser.add_argument(
        "--total-limit",
        type=float,
        help=f"seconds for all stages (default {GPU_TOTAL_S:.0f}; dry run {CPU_TOTAL_S:.0f})",
    )
    parser.add_argument("--stages", help="comma-separated subset of the stages, e.g. train-smoke,profile-fp32")
    parser.add_argument("--list", action="store_true", help="print the stages and exit")
    args = parser.parse_args(argv)
    python = sys.executable
    stages = cpu_stages(python) if args.dry_run else gpu_stages(python)
    try:
        stages = select(stages, args.stages)
    except ValueError as error:
        parser.error(str(error))
    total = args.total_limit or (CPU_TOTAL_S if args.dry_run else GPU_TOTAL_S)
    if args.list:
        print(f"{'stage':<16} {'limit s':>7} {'expected s':>10}  command")
        for stage in stages:
            expected = f"{stage.expected_s:.0f}" if stage.expected_s is not None else "-"
            print(f"{stage.name:<16} {stage.limit_s:>7.0f} {expected:>10}  {' '.join(stage.command)}")
        print(f"limits sum to {sum(s.limit_s for s in stages):.0f} s; total limit {total:.0f} s")
        return 0
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    default_dir = REPO_ROOT / "benchmarks" / "results" / f"gpu_check_{stamp}"
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else default_dir)
    work = args.work_dir or default_dir / "stages"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
        PYTHON=python,
    )
    results = run_stages(
        stages, work.resolve(), out.resolve(), total, cwd=REPO_ROOT, meta=machine_meta(args.dry_run), env=env
    )
    print(f"\nsummary: {out / 'summary.txt'}")
    print((out / "summary.txt").read_text())
    return 0 if all_as_expected(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
