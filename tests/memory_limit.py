"""Running a memory bomb in a child Python under an address-space limit, so a regression fails its test instead
of filling the machine (tests/ is on sys.path: see tests/conftest.py)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

# A Python importing torch and asr_plugin maps ~3.5 GiB of address space; the bombs ask for 38 GB and more.
DEFAULT_LIMIT = 8 * 2**30


def run_limited(code: str, limit_bytes: int = DEFAULT_LIMIT, timeout: float = 180) -> subprocess.CompletedProcess:
    """Runs `code` (dedented) in a new Python whose RLIMIT_AS is `limit_bytes`, one thread per library;
    returns the finished process (stdout and stderr as text)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit, env=env)


def refusal(code: str, limit_bytes: int = DEFAULT_LIMIT) -> str:
    """The ValueError message `code` raises (it must print ``REFUSED: <message>``), asserting the child ended
    cleanly within the limit."""
    result = run_limited(code, limit_bytes)
    assert result.returncode == 0 and "REFUSED: " in result.stdout, (result.returncode, result.stdout, result.stderr[-2000:])
    return result.stdout.split("REFUSED: ", 1)[1].strip()
