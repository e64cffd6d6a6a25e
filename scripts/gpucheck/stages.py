"""Run a list of commands ("stages") under per-stage and total time limits, keeping every result.

A stage is one subprocess (its own process group, so a stage that overruns is cut with everything it
started). Its output is streamed to the console and to ``<stage dir>/log.txt``; the files it writes into
its stage directory, and the table rendered from them, are the stage's results. After every stage the
runner rewrites, atomically, in the output folder:

- ``summary.json``: every stage's status (passed, failed, timed_out, skipped), seconds, limit, expected
  seconds, return code and table;
- ``summary.txt``: the same for people, the tables included;
- ``results.tar.gz``: every stage directory so far (logs, tables, JSON), large binary traces left out;
- ``traces.tar``: the left-out traces (``*.trace.json.gz``), when there are any.

So a command killed at any moment (a device run at its limit) returns everything finished before it, in
at most four files. Stage limits are cut to the time left of the total, and a stage for which less than
`min_stage_s` is left, or whose prerequisite did not pass, is reported skipped without running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from asr_plugin.files import write_atomic, write_text_atomic

STATUSES = ("passed", "failed", "timed_out", "skipped")
TRACE_SUFFIX = ".trace.json.gz"
# SIGTERM first (Python's finally blocks, pytest's junit writer), SIGKILL after this grace period
KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class Stage:
    """One command of a check.

    Attributes:
        name: short name, also the stage directory's (letters, digits, '-' and '_').
        command: argv; ``{dir}`` in any argument is replaced by the stage directory, ``{limit}`` by the
            stage's limit in whole seconds (cut to what is left of the total).
        limit_s: the stage is cut (process group killed) after this many seconds.
        expected_s: the time it should take (a figure for the report, not enforced).
        needs: names of earlier stages that must have passed for this one to run.
        table: renders the stage's table from its directory (None: no table).
        expect: the status a correct run ends with; "timed_out" for a stage that checks the cutting itself.
    """

    name: str
    command: Sequence[str]
    limit_s: float
    expected_s: float | None = None
    needs: Sequence[str] = ()
    table: Callable[[Path], str] | None = None
    expect: str = "passed"

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise ValueError(f"stage name {self.name!r}: use letters, digits, '-' and '_' only")
        if self.limit_s <= 0:
            raise ValueError(f"stage {self.name}: limit_s must be positive, got {self.limit_s}")
        if self.expect not in STATUSES:
            raise ValueError(f"stage {self.name}: expect must be one of {STATUSES}, got {self.expect!r}")


@dataclass
class StageResult:
    name: str
    status: str
    seconds: float
    limit_s: float
    expected_s: float | None
    expect: str
    returncode: int | None = None
    reason: str = ""
    command: list[str] = field(default_factory=list)
    table: str = ""

    @property
    def as_expected(self) -> bool:
        return self.status == self.expect


def _stream(pipe, log, echo) -> None:
    """Copies the child's output to the log file and the console as it comes."""
    for chunk in iter(lambda: pipe.read1(65536), b""):
        log.write(chunk)
        log.flush()
        echo.write(chunk)
        echo.flush()


def _kill_group(process: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_stage(
    stage: Stage, stage_dir: Path, limit_s: float, cwd: Path, env: dict[str, str] | None = None, echo=None
) -> StageResult:
    """Runs one stage for at most `limit_s` seconds; its output goes to ``stage_dir/log.txt`` (and `echo`)."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    command = [part.replace("{dir}", str(stage_dir)).replace("{limit}", str(int(limit_s))) for part in stage.command]
    echo = echo if echo is not None else sys.stdout.buffer
    partial = stage_dir / "log.txt.partial"  # renamed to log.txt when the stage is over
    start = time.monotonic()
    status, returncode = "failed", None
    with open(partial, "wb") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        try:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            log.write(f"could not start: {error}\n".encode())
            reason = f"could not start: {error}"
        else:
            reader = threading.Thread(target=_stream, args=(process.stdout, log, echo), daemon=True)
            reader.start()
            try:
                returncode = process.wait(timeout=limit_s)
                status = "passed" if returncode == 0 else "failed"
                reason = "" if returncode == 0 else f"exit status {returncode}"
            except subprocess.TimeoutExpired:
                _kill_group(process)
                returncode = process.returncode
                status, reason = "timed_out", f"cut at its limit of {limit_s:.0f} s"
            # the pipe closes when the last process of the group is gone; a process that left the group
            # (setsid) could hold it open, so do not wait for the reader forever
            reader.join(timeout=KILL_GRACE_S)
            process.stdout.close()
        log.flush()
        os.fsync(log.fileno())
    os.replace(partial, stage_dir / "log.txt")
    seconds = time.monotonic() - start
    result = StageResult(
        stage.name, status, seconds, limit_s, stage.expected_s, stage.expect, returncode, reason, command
    )
    if stage.table is not None:
        try:
            result.table = stage.table(stage_dir)
        except (OSError, ValueError, KeyError, TypeError) as error:  # a failed stage often left no results
            result.table = f"(no table: {type(error).__name__}: {error})"
        if result.table:
            write_text_atomic(stage_dir / "table.txt", result.table + "\n")
    return result


def skipped(stage: Stage, reason: str) -> StageResult:
    return StageResult(
        stage.name,
        "skipped",
        0.0,
        stage.limit_s,
        stage.expected_s,
        stage.expect,
        reason=reason,
        command=list(stage.command),
    )


def _status_text(result: StageResult) -> str:
    text = result.status + ("" if result.as_expected or result.expect == "passed" else f" (expected {result.expect})")
    if result.as_expected and result.expect != "passed":
        text += " (as expected)"
    return text


def summary_text(results: Sequence[StageResult], header: Sequence[str] = ()) -> str:
    """The report for people: one line per stage, then each stage's table."""
    lines = list(header)
    lines.append(f"{'stage':<22} {'status':<26} {'seconds':>8} {'limit':>6} {'expected':>8}  note")
    for result in results:
        expected = f"{result.expected_s:.0f}" if result.expected_s is not None else "-"
        lines.append(
            f"{result.name:<22} {_status_text(result):<26} {result.seconds:>8.1f} {result.limit_s:>6.0f} "
            f"{expected:>8}  {result.reason}"
        )
    ran = [r for r in results if r.status != "skipped"]
    lines.append(
        f"{len(ran)} of {len(results)} stages ran, {sum(r.status == 'passed' for r in results)} passed, "
        f"{sum(r.status == 'failed' for r in results)} failed, {sum(r.status == 'timed_out' for r in results)} "
        f"timed out, {sum(r.status == 'skipped' for r in results)} skipped; "
        f"{sum(r.seconds for r in results):.0f} s in all"
    )
    for result in results:
        if result.table:
            lines += ["", f"== {result.name}", result.table]
    return "\n".join(lines) + "\n"


def _write_archive(path: Path, root: Path, members: Sequence[Path], compress: bool) -> None:
    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:gz" if compress else "w") as archive:
            for member in members:
                archive.add(member, arcname=str(member.relative_to(root)))
        with open(tmp, "rb") as done:
            os.fsync(done.fileno())

    write_atomic(path, write)


def write_outputs(results: Sequence[StageResult], work_dir: Path, out_dir: Path, meta: dict) -> None:
    """summary.json, summary.txt, results.tar.gz and (when there are traces) traces.tar in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    header = [f"{key}: {value}" for key, value in meta.items()]
    write_text_atomic(
        out_dir / "summary.json", json.dumps(dict(meta=meta, stages=[asdict(r) for r in results]), indent=2)
    )
    write_text_atomic(out_dir / "summary.txt", summary_text(results, header))
    stage_dirs = [work_dir / r.name for r in results if (work_dir / r.name).is_dir()]
    files = sorted(p for d in stage_dirs for p in d.rglob("*") if p.is_file() and not p.name.endswith(".partial"))
    traces = [p for p in files if p.name.endswith(TRACE_SUFFIX)]
    _write_archive(out_dir / "results.tar.gz", work_dir, [p for p in files if p not in traces], compress=True)
    if traces:  # already gzipped; kept apart so that a large trace never costs the results their way back
        _write_archive(out_dir / "traces.tar", work_dir, traces, compress=False)


def run_stages(
    stages: Sequence[Stage],
    work_dir: Path,
    out_dir: Path,
    total_limit_s: float,
    cwd: Path,
    meta: dict | None = None,
    env: dict[str, str] | None = None,
    min_stage_s: float = 5.0,
    echo=None,
) -> list[StageResult]:
    """Runs `stages` in order within `total_limit_s`, writing the outputs after every stage (see the module)."""
    names = [stage.name for stage in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"stage names must be unique, got {names}")
    echo = echo if echo is not None else sys.stdout.buffer
    meta = dict(meta or {})
    deadline = time.monotonic() + total_limit_s
    results: list[StageResult] = []
    for stage in stages:
        done = {r.name: r for r in results}
        missing = [need for need in stage.needs if need not in done or done[need].status != "passed"]
        left = deadline - time.monotonic()
        if missing:
            result = skipped(stage, f"needs {', '.join(missing)}, which did not pass")
        elif left < min_stage_s:
            result = skipped(stage, f"no time left ({max(left, 0):.0f} s of the {total_limit_s:.0f} s total)")
        else:
            limit = min(stage.limit_s, left)
            echo.write(f"\n=== {stage.name} (limit {limit:.0f} s)\n".encode())
            echo.flush()
            result = run_stage(stage, work_dir / stage.name, limit, cwd, env, echo)
            if limit < stage.limit_s and result.status == "timed_out":
                result.reason += f" (the total's remainder; its own limit is {stage.limit_s:.0f} s)"
            echo.write(f"=== {stage.name}: {result.status} in {result.seconds:.1f} s\n".encode())
            echo.flush()
        results.append(result)
        write_outputs(results, work_dir, out_dir, meta)
    return results


def all_as_expected(results: Sequence[StageResult]) -> bool:
    return all(result.as_expected for result in results)
