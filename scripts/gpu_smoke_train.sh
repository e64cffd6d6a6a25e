#!/usr/bin/env bash
# The first training steps on a GPU: does the LibriSpeech recipe train at full utterance length, and how large
# a batch fits? Synthesises a LibriSpeech-layout corpus of 35-40 s utterances (make_synthetic_librispeech.py),
# then runs scripts/gpucheck/smoke.py: experiment=librispeech_medium with the Parakeet-RNNT-1.1B-sized preset
# (1024 pieces) and the medium preset (500), bf16-mixed, both loss modes (sample-wise at a 2 GiB budget), a
# handful of steps each (utterances/s, audio-seconds/s, peak memory, loss finite), then the largest batch that
# trains per model and mode (a bounded search). Results: <out>/smoke.json, rewritten after every run.
#
#   bash scripts/gpu_smoke_train.sh [--out DIR] [--work-dir DIR] [--utterances 256] [--time-limit 540]
#        [--quick] [--dry-run] [more gpucheck.smoke options, e.g. --models medium:500 --steps 10]
#
# --quick: the throughput runs only, 4 steps on 64 utterances (the GPU check's stage). --dry-run: the same code path
# sized for a CPU (micro model, 3-4 s utterances, batches of 4, 3 steps, a 3-try search), no GPU needed.
# --out defaults to $OUT when set, else benchmarks/results/gpu_smoke; the corpus, manifests and run logs go to
# --work-dir (default /tmp/asr_gpu_smoke).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
export PYTHONPATH="$repo_root:$repo_root/scripts${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python=${PYTHON:-python3}

out=${OUT:-$repo_root/benchmarks/results/gpu_smoke}
work_dir=/tmp/asr_gpu_smoke
utterances=256
time_limit=540
mode=full
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --work-dir) work_dir=$2; shift 2 ;;
    --utterances) utterances=$2; shift 2 ;;
    --time-limit) time_limit=$2; shift 2 ;;
    --quick) mode=quick; shift ;;
    --dry-run) mode=dry-run; shift ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done

case "$mode" in
  full) min_s=35 max_s=40 args=(--search) ;;
  quick) min_s=35 max_s=40 utterances=64 args=(--steps 4) ;;
  dry-run)
    min_s=3 max_s=4 utterances=12
    args=(--device cpu --models tiny:64 --batch 4 --steps 3 --num-workers 0 --search --search-start 2 --max-trials 3)
    for size in model.d_model=32 model.num_layers=1 model.num_heads=2 model.ffn_dim=64 model.conv_kernel_size=3 \
                model.predictor_embed_dim=16 model.predictor_dim=32 model.joint_dim=32; do
      args+=(--override "$size")
    done ;;
esac
corpus="$work_dir/corpus_${utterances}x${min_s}-${max_s}s/LibriSpeech"
"$python" scripts/make_synthetic_librispeech.py --root "$corpus" --split "train-clean-100:$utterances" \
  --min-seconds "$min_s" --max-seconds "$max_s"
# the time the corpus took is the smoke's no longer
exec "$python" -m gpucheck.smoke --corpus "$corpus" --out "$out" --work-dir "$work_dir/$mode" \
  --max-seconds "$max_s" --time-limit "$(( time_limit > SECONDS ? time_limit - SECONDS : 1 ))" "${args[@]}" "${extra[@]}"
