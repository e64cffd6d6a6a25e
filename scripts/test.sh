#!/usr/bin/env bash
# The README's test command: installs the package with its dev extra, then runs the whole suite on every core
# (pytest-xdist; the tests that start several processes of their own keep to one worker, their xdist_group).
# Arguments go to pytest: `bash scripts/test.sh -m "not slow"`, `bash scripts/test.sh tests/losses`.
# ASR_PLUGIN_INSTALLED=1 skips the install (.ci/run sets it: it installed the same a few minutes before).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${ASR_PLUGIN_INSTALLED:-}" != 1 ]]; then
  python -m pip install -q -e '.[dev]'
fi
python -m pytest -n auto --dist loadgroup "$@"
