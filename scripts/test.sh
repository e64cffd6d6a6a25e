#!/usr/bin/env bash
# The README's test command: installs the package with its dev extra, then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[dev]'
python -m pytest "$@"
