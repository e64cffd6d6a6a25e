"""Prints, one a line, the `uv pip install` options that make uv install what pip would on this machine: uv reads
none of pip's configuration (its files and PIP_* variables), so each index, find-links folder and constraints
file that `pip config list` shows is passed on, and uv picks the best version over all indexes as pip does
(`--index-strategy unsafe-best-match`; uv's default takes a package from the first index that has it)."""

from __future__ import annotations

import ast
import subprocess
import sys

# pip's setting -> uv's option; every one of them may hold several values, separated by white space
OPTIONS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def uv_options(pip_config: str) -> list[str]:
    """uv's options of `pip config list`'s output (lines ``section.name='value'``; section ``:env:`` for a
    PIP_* variable), each value once."""
    pairs: list[tuple[str, str]] = []
    for line in pip_config.splitlines():
        key, _, value = line.partition("=")
        option = OPTIONS.get(key.rpartition(".")[2])
        if option is not None:
            pairs += [(option, item) for item in ast.literal_eval(value).split() if (option, item) not in pairs]
    return ["--index-strategy", "unsafe-best-match", *(word for pair in pairs for word in pair)]


if __name__ == "__main__":
    config = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    print("\n".join(uv_options(config)))
