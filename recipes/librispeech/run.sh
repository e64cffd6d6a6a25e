#!/usr/bin/env bash
# LibriSpeech transducer recipe: prepare -> tokenizer -> stats -> train -> decode.
#
#   bash recipes/librispeech/run.sh [--stage N] [--stop-stage M] [--data-dir DIR] [--download true|false] \
#        [--vocab-size 500] [--nj 8] [-- extra hydra overrides for train.py/eval.py]
#
# Stages: 0 prepare (optional download + manifests), 1 tokenizer, 2 feature stats, 3 train, 4 decode.
# Every stage reuses what earlier runs wrote (manifests, tokenizer and stats are never overwritten).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"
export PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}"

stage=0
stop_stage=4
data_dir="$repo_root/data"
download=false
vocab_size=500
model_type=bpe
nj=$(nproc)
train_splits="train-clean-100 train-clean-360 train-other-500"
eval_splits="dev-clean dev-other test-clean test-other"
extra=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --stage) stage=$2; shift 2 ;;
    --stop-stage) stop_stage=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    --download) download=$2; shift 2 ;;
    --vocab-size) vocab_size=$2; shift 2 ;;
    --nj) nj=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1" >&2; exit 1 ;;
  esac
done

root="$data_dir/LibriSpeech"
manifest_dir="$data_dir/manifests/librispeech"
tokenizer="$manifest_dir/tokenizer_${model_type}${vocab_size}.model"
stats="$manifest_dir/feature_stats.json"
train_manifests=()
for split in $train_splits; do train_manifests+=("$manifest_dir/$split.jsonl"); done

run_stage() { [[ $stage -le $1 && $stop_stage -ge $1 ]]; }

if run_stage 0; then
  echo "stage 0: manifests in $manifest_dir"
  download_flag=()
  [[ $download == true ]] && download_flag=(--download)
  python scripts/prepare_librispeech.py --root "$root" --manifest-dir "$manifest_dir" \
    --splits $train_splits $eval_splits --num-workers "$nj" "${download_flag[@]}"
fi

if run_stage 1; then
  echo "stage 1: tokenizer $tokenizer"
  if [[ -f $tokenizer ]]; then echo "  exists, reusing"; else
    python scripts/train_tokenizer.py --manifests "${train_manifests[@]}" --output "$tokenizer" \
      --vocab-size "$vocab_size" --model-type "$model_type"
  fi
fi

if run_stage 2; then
  echo "stage 2: feature stats $stats"
  if [[ -f $stats ]]; then echo "  exists, reusing"; else
    python scripts/compute_feature_stats.py --manifests "${train_manifests[@]}" --output "$stats" \
      --max-utterances 5000 --num-workers "$nj"
  fi
fi

data_overrides=(data=librispeech "paths.data_dir=$data_dir" "data.root=$root" "data.manifest_dir=$manifest_dir"
  "data.vocab_size=$vocab_size" "data.tokenizer_type=$model_type")

if run_stage 3; then
  echo "stage 3: train"
  python recipes/librispeech/train.py "${data_overrides[@]}" "${extra[@]}"
fi

if run_stage 4; then
  echo "stage 4: decode"
  python recipes/librispeech/eval.py "${data_overrides[@]}" "${extra[@]}"
fi
