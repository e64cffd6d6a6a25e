#!/usr/bin/env bash
# The README's test command: installs the package with its dev extra, then runs the whole suite on every core
# (pytest-xdist; the tests that start several processes of their own keep to one worker, their xdist_group).
# Arguments go to pytest: `bash scripts/test.sh -m "not slow"`, `bash scripts/test.sh tests/losses`.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[dev]'
python -m pytest -n auto --dist loadgroup "$@"
