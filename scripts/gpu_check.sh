#!/usr/bin/env bash
# The GPU check of the loss engine and the recipe in one command that fits a 10-minute device run (9 minutes
# at most, the extension build included) and never loses its results. Stages, in priority order, each with its
# own limit: build, CUDA tests, the paper-scale cells (B=1024, T=1000, U=200, H=512, V=1024, sample-wise) in
# bf16 autocast and fp32 at the named budgets and 1 GiB, fp32 with TF32 allowed, the training smoke
# (scripts/gpu_smoke_train.sh --quick), the profiles of one bf16 and one fp32 cell. After every stage the output
# folder (default $OUT when set) gets summary.txt, summary.json and results.tar.gz (every stage's log, table and
# JSON); a stage that overruns its limit is cut and the rest still run. See docs/loss.md, "Running the GPU check".
#
#   bash scripts/gpu_check.sh [--out DIR] [--stages build,paper-bf16,...] [--total-limit 540] [--list]
#   bash scripts/gpu_check.sh --dry-run --out /tmp/gpu_check_dry    # the same stages at CPU sizes, no GPU
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH="$PWD:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" -m gpucheck "$@"
