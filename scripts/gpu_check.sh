#!/usr/bin/env bash
# GPU check of the transducer loss engine on one GPU machine without network (~8 min on one H200):
# builds the CPU and CUDA extensions, runs the CUDA tests, then the GPU benchmark preset in fp32 and
# bf16 autocast, and prints a summary. Usage: bash scripts/gpu_check.sh  (from anywhere in the repo)
set -uo pipefail
cd "$(dirname "$0")/.."
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
declare -a summary

stage() {  # stage NAME TIMEOUT_S COMMAND...: run, time and record the outcome
    local name=$1 limit=$2 start rc
    shift 2
    echo "=== $name"
    start=$(date +%s)
    timeout "$limit" "$@"
    rc=$?
    summary+=("$(printf '%-28s %-6s %4ss' "$name" "$([ $rc -eq 0 ] && echo ok || echo "rc=$rc")" "$(($(date +%s) - start))")")
    return $rc
}

python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible'; print(torch.cuda.get_device_name(), torch.version.cuda)" || exit 1
stage "build CPU+CUDA extensions" 300 python -c "from asr_plugin.losses._extension import build_cuda_extension; build_cuda_extension()"
stage "CUDA tests" 180 python -m pytest tests/losses/test_transducer_cuda.py -q -rs
stage "benchmark gpu fp32" 240 python scripts/benchmark_loss.py --device cuda --preset gpu-targets --dtype fp32 --repeats 2
stage "benchmark gpu bf16-autocast" 120 python scripts/benchmark_loss.py --device cuda --preset gpu-targets --dtype bf16-autocast --repeats 2 --modes batched,samplewise

echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "targets: B=1024 T=1000 U=200 H=512 V=1024 sample-wise fp32 <= 5 GiB and <= 15 s, bf16 <= 3 GiB and <= 3 s;"
echo "         B=32 T=250 U=50: sample-wise no slower than torchaudio; ours batched below torchaudio's memory and runs T=1000."
