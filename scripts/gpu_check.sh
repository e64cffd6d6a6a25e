#!/usr/bin/env bash
# GPU check of the transducer loss engine on one GPU machine without network. Stages, in priority order:
# build the CPU and CUDA extensions, run the CUDA tests, the paper-scale cells (B=1024, T=1000, U=200, H=512,
# V=1024, sample-wise, standard fused joint) in fp32 and bf16 autocast at the named budgets (192 MiB and 160 MiB fp32,
# 512 MiB bf16) and the default budget (1 GiB), then the B=32 comparison cells against torchaudio.
# Each stage has its own timeout; the stages before `paper` fit one 10-minute device command (~6-8 min on
# one H200, estimated), the comparison stage may need a second call:
#   bash scripts/gpu_check.sh            # all stages
#   bash scripts/gpu_check.sh paper      # build, CUDA tests, paper-scale cells only
#   bash scripts/gpu_check.sh compare    # the B=32 comparison cells only (extensions already built)
#   bash scripts/gpu_check.sh profile    # build if needed, then scripts/profile_loss.py on three B=128 cells (T=1000,
#                                        # U=200, H=512, V=1024): fp32 at 192 MiB, bf16 autocast at 512 MiB and 1 GiB
#                                        # (~2-3 min on one H200, estimated; not part of `all`)
# Results: the tables on stdout and JSON under benchmarks/results/ (copy them to $OUT on the device machine);
# `profile` also writes a gzipped chrome trace per cell there.
set -uo pipefail
cd "$(dirname "$0")/.."
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
what="${1:-all}"
case "$what" in
    all | paper | compare | profile) ;;
    *) echo "usage: bash scripts/gpu_check.sh [all|paper|compare|profile]" >&2; exit 2 ;;
esac
declare -a summary

stage() {  # stage NAME TIMEOUT_S COMMAND...: run, time and record the outcome
    local name=$1 limit=$2 start rc
    shift 2
    echo "=== $name"
    start=$(date +%s)
    timeout "$limit" "$@"
    rc=$?
    summary+=("$(printf '%-32s %-6s %4ss' "$name" "$([ $rc -eq 0 ] && echo ok || echo "rc=$rc")" "$(($(date +%s) - start))")")
    return $rc
}

python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible'; print(torch.cuda.get_device_name(), torch.version.cuda)" || exit 1
bench=(python scripts/benchmark_loss.py --device cuda)
if [ "$what" != compare ]; then  # a cached build takes seconds
    stage "build CPU+CUDA extensions" 180 python -m asr_plugin.losses.build --cuda
fi
if [ "$what" = all ] || [ "$what" = paper ]; then
    stage "CUDA tests" 150 python -m pytest tests/losses/test_transducer_cuda.py tests/losses/test_transducer_fused_joint.py -q -rs
    stage "paper fp32 (192MiB, 1GiB, 160MiB)" 210 "${bench[@]}" --preset paper --dtype fp32 --repeats 1
    stage "paper bf16 (512MiB, 1GiB)" 90 "${bench[@]}" --preset paper --dtype bf16-autocast --repeats 2
fi
if [ "$what" = profile ]; then
    profile=(python scripts/profile_loss.py --device cuda --B 128 --T 1000 --U 200 --H 512 --V 1024 --joint standard --steps 1)
    stage "profile fp32 192MiB (B=128)" 120 "${profile[@]}" --dtype fp32 --memory-budget 192MiB
    stage "profile bf16 512MiB (B=128)" 90 "${profile[@]}" --dtype bf16-autocast --memory-budget 512MiB
    stage "profile bf16 1GiB (B=128)" 90 "${profile[@]}" --dtype bf16-autocast --memory-budget 1GiB
fi
if [ "$what" = all ] || [ "$what" = compare ]; then
    stage "compare fp32 (B=32)" 240 "${bench[@]}" --preset gpu-targets --dtype fp32 --repeats 2
    stage "compare bf16 (B=32)" 120 "${bench[@]}" --preset gpu-targets --dtype bf16-autocast --repeats 2 --modes batched,samplewise
fi

echo "=== summary"
printf '%s\n' "${summary[@]}"
[ "$what" = profile ] && exit 0
echo "targets: B=1024 T=1000 U=200 H=512 V=1024 sample-wise fp32 <= 5 GiB and <= 15 s (192 MiB budget),"
echo "         bf16 autocast <= 3 GiB and <= 3 s (512 MiB budget); report the default (1 GiB) figures too;"
echo "         B=32 T=250 U=50: sample-wise no slower than torchaudio; ours batched below torchaudio's memory and runs T=1000."
