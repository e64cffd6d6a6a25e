#!/usr/bin/env bash
# Does the real LibriSpeech recipe train on this GPU? One run answers it: the `medium` model of
# experiment=librispeech_medium on a synthesised LibriSpeech-layout corpus of full-length (35-40 s)
# utterances, a few hundred steps in each loss mode, then a table of utterances/s, peak GPU memory and
# the training loss (first and last 20 steps) per mode.
#
#   bash scripts/gpu_smoke_train.sh [--steps 300] [--utterances 400] [--work-dir /tmp/asr_gpu_smoke]
#        [--train-args "more hydra overrides"] [--dry-run]
#
# --dry-run: the same code path sized for a CPU (a micro model, 3-4 s utterances, 4 steps, trainer=default):
# proves the script, corpus, recipe stages 0-2 and both loss modes work end to end, without a GPU.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
export PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}"

steps=300
utterances=400
work_dir=/tmp/asr_gpu_smoke
train_args=
dry_run=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --utterances) utterances=$2; shift 2 ;;
    --work-dir) work_dir=$2; shift 2 ;;
    --train-args) train_args=$2; shift 2 ;;
    --dry-run) dry_run=true; shift ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_smoke_train.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $dry_run == true ]]; then
  steps=4 utterances=12 min_s=3 max_s=4 vocab=64 window=2
  size=(model=tiny model.d_model=32 model.num_layers=1 model.num_heads=2 model.ffn_dim=64 model.conv_kernel_size=3
        model.predictor_embed_dim=16 model.predictor_dim=32 model.joint_dim=32 trainer=default data.max_duration=10 data.num_buckets=2
        data.num_workers=0 data.pin_memory=false data.persistent_workers=false)
else
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  min_s=35 max_s=40 vocab=500 window=$(( steps < 6 ? 2 : steps / 3 ))
  # one GPU, the experiment's precision (bf16-mixed) and batches (600 s padded)
  size=(trainer.devices=1 "data.num_workers=$(( $(nproc) < 8 ? $(nproc) : 8 ))")
fi
data_dir="$work_dir/data"
eval "extra=($train_args)"

python scripts/make_synthetic_librispeech.py --root "$data_dir/LibriSpeech" --split "train-clean-100:$utterances" \
  --split dev-clean:8 --split test-clean:8 --min-seconds "$min_s" --max-seconds "$max_s"
manifests="$data_dir/manifests/librispeech"
bash recipes/librispeech/run.sh --stop-stage 2 --data-dir "$data_dir" --work-dir "$manifests" --nj "$(nproc)" \
  --vocab-size "$vocab" --train-splits train-clean-100 --valid-splits dev-clean --eval-splits "dev-clean test-clean"

for mode in batched samplewise; do
  echo "== $mode: $steps steps"
  python recipes/librispeech/train.py experiment=librispeech_medium data=librispeech "paths.data_dir=$data_dir" \
    "data.root=$data_dir/LibriSpeech" "data.work_dir=$manifests" "data.vocab_size=$vocab" \
    "data.train_splits=[train-clean-100]" "data.valid_splits=[dev-clean]" "data.test_splits=[test-clean]" \
    "+loss=$mode" "trainer.max_steps=$steps" trainer.limit_val_batches=0 trainer.log_every_n_steps=1 \
    trainer.enable_progress_bar=false test=false callbacks.step_checkpoint=null \
    "optim.scheduler.warmup_steps=$(( steps < 1000 ? 1000 : steps ))" \
    "+callbacks.throughput._target_=lightning.pytorch.callbacks.ThroughputMonitor" \
    "+callbacks.throughput.batch_size_fn={_target_: builtins.len, _partial_: true}" \
    "+callbacks.throughput.window_size=$window" \
    "hydra.run.dir=$work_dir/runs/$mode" "${size[@]}" "${extra[@]}"
done

python - "$work_dir/runs" <<'EOF'
"""One line per loss mode from each run's csv/metrics.csv."""
import csv
import sys
from pathlib import Path

print(f"{'loss mode':<11} {'steps':>5} {'utt/s':>7} {'peak GPU MiB':>12} {'loss first 20':>13} {'loss last 20':>12}")
for mode in ("batched", "samplewise"):
    rows = list(csv.DictReader(open(Path(sys.argv[1]) / mode / "csv" / "metrics.csv")))
    def values(key):
        return [float(row[key]) for row in rows if row.get(key)]
    losses, rates, peaks = values("train/loss_step"), values("train/device/samples_per_sec"), values("train/peak_memory_mib")
    rate = f"{sum(rates) / len(rates):.2f}" if rates else "n/a"
    peak = f"{max(peaks):.0f}" if peaks else "n/a (CPU)"
    first, last = sum(losses[:20]) / len(losses[:20]), sum(losses[-20:]) / len(losses[-20:])
    print(f"{mode:<11} {len(losses):>5} {rate:>7} {peak:>12} {first:>13.3f} {last:>12.3f}")
EOF
