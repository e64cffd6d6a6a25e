"""Benchmark, profiling and comparison code behind ``scripts/`` (the scripts are thin command lines over it, and the
tests import it from here): the loss benchmarks and profiles, and the NeMo comparisons' tools (`nemo_examples`:
NeMo's example configs and models built from them; `nemo_reference`: a model trained and fine-tuned by NeMo
itself). It lives beside the package, not in it: users never import it; it may use any layer of the package, and
nothing in the package imports it. Importable as ``benchmarks`` with ``scripts/`` on the path (a script's own
directory, pytest's ``pythonpath``)."""

from __future__ import annotations

import os
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parents[1]


def child_environment(**extra: str) -> dict[str, str]:
    """This process' environment, plus `extra`, with ``scripts/`` first on ``PYTHONPATH``: a child
    ``python -m benchmarks.<module>`` imports this package whatever its working directory."""
    paths = [str(SCRIPTS_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(paths)}
