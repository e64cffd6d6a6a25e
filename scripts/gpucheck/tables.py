"""Tables of the GPU check's stages, rendered from the files each stage writes (never from its log).

- pytest: the JUnit XML (``--junitxml``);
- ``scripts/benchmark_loss.py``: its ``loss_<device>_<preset>_<dtype>_<stamp>.json`` (``rows``), with the
  paper-scale targets judged per row;
- ``scripts/profile_loss.py``: its ``profile_*.json`` summaries;
- the training smoke: its ``smoke.json`` (``gpucheck.smoke``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MiB = 2**20


PAPER_CELL = dict(B=1024, T=1000, U=200, V=1024, H=512)


@dataclass(frozen=True)
class Target:
    """A paper-scale target: forward + backward of the paper cell within `seconds` and `mib` of peak memory."""

    seconds: float
    mib: float

    def verdict(self, row: dict) -> str:
        """ "met", "missed (time)", ... for a row of the paper cell; "" for any other cell (no target there)."""
        if any(row.get(key) != value for key, value in PAPER_CELL.items()):
            return ""
        if "error" in row:
            return "not run"
        time_ok, memory_ok = row["time_s"] <= self.seconds, row["peak_bytes"] / MiB <= self.mib
        if time_ok and memory_ok:
            return "met"
        missed = [what for what, ok in (("time", time_ok), ("memory", memory_ok)) if not ok]
        return f"missed ({' and '.join(missed)})"


# B=1024, T=1000, U=200, H=512, V=1024, sample-wise, fp32 without TF32 / bf16 autocast, each at one named budget
PAPER_TARGETS = {"fp32": Target(15.0, 5 * 1024), "bf16-autocast": Target(3.0, 3 * 1024)}


def _one(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    if not found:
        raise FileNotFoundError(f"no {pattern} in {directory}")
    return found[-1]


def junit_table(stage_dir: Path) -> str:
    """Counts of a pytest run and the names of the tests that failed, from ``junit.xml``."""
    root = ElementTree.parse(_one(stage_dir, "junit.xml")).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    cases = [case for suite in suites for case in suite.iter("testcase")]

    def outcome(case) -> str:
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                return tag
        return "passed"

    outcomes = [outcome(case) for case in cases]
    lines = [", ".join(f"{outcomes.count(o)} {o}" for o in ("passed", "failure", "error", "skipped"))]
    lines += [
        f"  {o}: {case.get('classname')}::{case.get('name')}"
        for case, o in zip(cases, outcomes)
        if o in ("failure", "error")
    ]
    return "\n".join(lines)


def benchmark_table(target_dtype: bool = True) -> Callable[[Path], str]:
    """Renderer of one ``benchmark_loss.py`` run; with `target_dtype`, each row is judged against the
    paper-scale target of the run's dtype (the TF32 cells are reported beside them, not judged)."""

    def render(stage_dir: Path) -> str:
        result = json.loads(_one(stage_dir, "loss_*.json").read_text())
        dtype = result["meta"]["dtype"]
        target = PAPER_TARGETS.get(dtype) if target_dtype else None
        lines = [
            f"{'cell':<32} {'dtype':<13} {'mode':<17} {'budget':>8} {'time (s)':>9} {'peak (MiB)':>11}  "
            + (f"target <= {target.seconds:g} s, <= {target.mib:.0f} MiB" if target else "note")
        ]
        for row in result["rows"]:
            cell = f"B={row['B']} T={row['T']} U={row['U']} V={row['V']} H={row['H']}"
            budget = row.get("memory_budget") or "default"
            mode = row["mode"] + (f"/{row['backend']}" if row.get("backend") else "")  # our modes: their kernels
            if "error" in row:
                lines.append(f"{cell:<32} {dtype:<13} {mode:<17} {budget:>8} {'-':>9} {'-':>11}  {row['error']}")
                continue
            note = target.verdict(row) if target else ""
            lines.append(
                f"{cell:<32} {dtype:<13} {mode:<17} {budget:>8} {row['time_s']:>9.3f} "
                f"{row['peak_bytes'] / MiB:>11.0f}  {note}"
            )
        return "\n".join(lines)

    return render


def profile_table(stage_dir: Path) -> str:
    """One line per ``profile_loss.py`` summary: step times, device-busy share and the largest categories."""
    lines = [
        f"{'cell':<22} {'dtype':<13} {'budget':>8} {'step (s)':>9} {'busy %':>7} {'steps':>6} "
        f"{'peak MiB':>9} {'est. MiB':>9}  largest categories (ms)"
    ]
    for path in sorted(stage_dir.glob("profile_*.json")):
        summary = json.loads(path.read_text())
        meta, step, plan = summary["meta"], summary["steps"][0], summary["plan"]
        cell = meta["cell"]
        name = f"B={cell['B']} T={cell['T']} U={cell['U']}"
        busy = 100 * step["busy_us"] / 1e6 / step["wall_s"] if step["wall_s"] else float("nan")
        peak = step["memory"].get("peak_bytes")  # CUDA only
        estimate = plan.get("estimated_peak_mib")
        categories = sorted(step["categories"].items(), key=lambda item: -item[1]["us"])[:3]
        largest = ", ".join(f"{name_} {entry['us'] / 1e3:.0f}" for name_, entry in categories)
        lines.append(
            f"{name:<22} {meta['dtype']:<13} {meta['memory_budget'] or 'default':>8} {summary['unprofiled_s']:>9.3f} "
            f"{busy:>7.1f} {plan['steps']:>6} {f'{peak / MiB:.0f}' if peak else '-':>9} "
            f"{f'{estimate:.0f}' if estimate else '-':>9}  {largest}"
        )
    if len(lines) == 1:
        raise FileNotFoundError(f"no profile_*.json in {stage_dir}")
    return "\n".join(lines)


def smoke_table(stage_dir: Path) -> str:
    """The training smoke's throughput runs and batch searches, from ``smoke.json``."""
    from gpucheck.smoke_results import render_results  # the smoke owns its result format

    return render_results(json.loads(_one(stage_dir, "smoke.json").read_text()))
