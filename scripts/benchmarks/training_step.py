"""One configuration of a training-step benchmark per fresh interpreter, and its peak memory and step times:
shared by ``scripts/benchmark_nemo_plugin.py`` and ``scripts/benchmark_transformers.py``.

A script measures a configuration (a JSON-able dict) by running itself with ``--run <json> --result <file>``
(`run_in_subprocess`), so that every peak starts from a clean process; there it times its step with `time_steps`.
CPU: the peak RSS above the RSS before the measured steps (VmHWM after a ``/proc/self/clear_refs`` reset), with
glibc told to map every block over 64 KiB on its own (MALLOC_MMAP_THRESHOLD_) so freed tensors leave the RSS;
CUDA: the peak allocated memory of the steps (model and inputs included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from asr_plugin.files import write_text_atomic
from benchmarks.loss import rss_kib


def time_steps(step: Callable[[], None], repeats: int, cuda: bool) -> dict:
    """`repeats` calls of `step` (after the caller's warm-up): peak_bytes, and the median wall time_s and cpu_s."""
    import torch

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        baseline = rss_kib("VmRSS")
    times, cpu_times = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    peak = torch.cuda.max_memory_allocated() if cuda else (rss_kib("VmHWM") - baseline) * 1024
    return dict(peak_bytes=peak, time_s=statistics.median(times), cpu_s=statistics.median(cpu_times))


def run_in_subprocess(script: str, run: dict) -> dict:
    """`script --run <run> --result <file>` in a fresh interpreter: the result it wrote, or {"error": ...}."""
    environment = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    with tempfile.TemporaryDirectory() as directory:
        result = Path(directory) / "result.json"
        process = subprocess.run(
            [sys.executable, script, "--run", json.dumps(run), "--result", str(result)],
            capture_output=True,
            text=True,
            env=environment,
        )
        if process.returncode < 0:  # its stderr's last line is whatever it printed before (the OOM killer's signal)
            return dict(error=f"killed by signal {-process.returncode}")
        if process.returncode != 0 or not result.exists():
            lines = process.stderr.strip().splitlines()
            return dict(error=lines[-1] if lines else f"exit status {process.returncode}")
        return json.loads(result.read_text())


def spread(values: list[float], scale: float, digits: int) -> str:
    """The rounds' values, scaled, as "v1 / v2 / ..."."""
    return " / ".join(f"{value / scale:.{digits}f}" for value in values)


def add_round_options(parser) -> None:
    """The options every such script takes: --rounds, --repeats, --json and the internal --run/--result."""
    parser.add_argument("--rounds", type=int, default=2, help="runs of every configuration, interleaved")
    parser.add_argument("--repeats", type=int, default=1, help="measured steps per run (median time)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # internal: one configuration in a subprocess
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)


def measure_requested(args, measure: Callable[[dict], dict]) -> bool:
    """In the subprocess `run_in_subprocess` starts (``--run``): writes `measure` of the run, returns True."""
    if not args.run:
        return False
    write_text_atomic(args.result, json.dumps(measure(json.loads(args.run))))
    return True


def run_rounds(script: str, runs: list[dict], args, header: dict) -> dict[str, list[dict]]:
    """Every run of `runs` `args.rounds` times, interleaved, each in a fresh interpreter (`run_in_subprocess`),
    logged to stderr and, after every run, written to ``args.json`` with `header` (an interrupted benchmark keeps
    what it measured); the results by run name."""
    results: dict[str, list[dict]] = {run["name"]: [] for run in runs}
    for round_number in range(1, args.rounds + 1):
        for run in runs:
            results[run["name"]].append(run_in_subprocess(script, run))
            print(f"round {round_number}: {run['name']}: {results[run['name']][-1]}", file=sys.stderr, flush=True)
            if args.json:
                write_text_atomic(args.json, json.dumps(dict(header, runs=runs, results=results), indent=1))
    return results


def print_rounds_table(
    runs: list[dict], results: dict[str, list[dict]], first_column: str, time_digits: int
) -> dict[str, list[dict]]:
    """One line per run: its rounds' peak MiB, wall and CPU step times (or its first error); returns the results
    of the runs that did not fail."""
    header = f"{first_column:<34} {'peak MiB':>15} {'step s (wall)':>17} {'step s (CPU)':>17}"
    print(header)
    print("-" * len(header))
    for run in runs:
        rounds = results[run["name"]]
        errors = [r["error"] for r in rounds if "error" in r]
        if errors:
            print(f"{run['name']:<34} failed: {errors[0]}")
            continue
        print(
            f"{run['name']:<34} {spread([r['peak_bytes'] for r in rounds], 2**20, 1):>15} "
            f"{spread([r['time_s'] for r in rounds], 1, time_digits):>17} "
            f"{spread([r['cpu_s'] for r in rounds], 1, time_digits):>17}"
        )
    return {name: rounds for name, rounds in results.items() if not any("error" in r for r in rounds)}
