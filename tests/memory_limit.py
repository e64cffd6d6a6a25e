"""Running a memory bomb in a child Python under an address-space limit, so a regression fails its test instead
of filling the machine (tests/ is on sys.path: see tests/conftest.py)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

# A Python importing torch and asr_plugin maps ~3.5 GiB of address space; the bombs ask for 38 GB and more.
DEFAULT_LIMIT = 8 * 2**30


def run_limited(code: str, limit_bytes: int = DEFAULT_LIMIT, timeout: float = 180) -> subprocess.CompletedProcess:
    """Runs `code` in a new Python whose RLIMIT_AS is `limit_bytes`, one thread per library;
    returns the finished process (stdout and stderr as text)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, preexec_fn=limit, env=env
    )


def refusals(imports: str, calls: list[str], limit_bytes: int = DEFAULT_LIMIT) -> list[str]:
    """The ValueError message of each of `calls` (Python expressions, after the `imports` line) run in one child
    under `run_limited`, asserting the child ended cleanly and that every call was refused."""
    lines = [imports, "for call in ("]
    lines += [f"        lambda: {call}," for call in calls]
    lines += ["):", "    try:", "        call()", "    except ValueError as err:", "        print('REFUSED:', err)"]
    result = run_limited("\n".join(lines), limit_bytes)
    messages = [message.strip() for message in result.stdout.split("REFUSED: ")[1:]]
    assert result.returncode == 0 and len(messages) == len(calls), (result.stdout, result.stderr[-2000:])
    return messages
