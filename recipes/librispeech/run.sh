#!/usr/bin/env bash
# LibriSpeech transducer recipe, ESPnet style: prepare -> tokenizer -> stats -> train -> decode.
#
#   bash recipes/librispeech/run.sh [--stage 0] [--stop-stage 4] [--data-dir DIR] [--download false]
#        [--train-splits "train-clean-100 train-clean-360 train-other-500"] [--valid-splits "dev-clean dev-other"]
#        [--eval-splits "dev-clean dev-other test-clean test-other"] [--vocab-size 500] [--nj N]
#        [--experiment librispeech_medium] [--exp-dir exp/<experiment>] [--avg 5]
#        [--train-args "hydra overrides for train.py"] [--eval-args "hydra overrides for eval.py"]
#
# Stages: 0 manifests (optional download), 1 tokenizer, 2 feature stats, 3 train (conf/experiment/<experiment>
# into --exp-dir), 4 decode --eval-splits with the average of the last --avg checkpoints of that run
# (into <exp-dir>/decode_avg<avg>). Stages 0-2 reuse what exists (nothing is overwritten), so training
# never prepares data itself; rerun stage 3 with --train-args "ckpt_path=last" to resume a killed run.
# Examples (docs/training.md):
#   bash recipes/librispeech/run.sh --data-dir /data --train-args "trainer.devices=8"
#   bash recipes/librispeech/run.sh --stage 4 --avg 10 --eval-args "decoding.methods=[greedy,beam] decoding.beam=8"
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"
export PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}"

stage=0
stop_stage=4
data_dir="$repo_root/data"
download=false
train_splits="train-clean-100 train-clean-360 train-other-500"
valid_splits="dev-clean dev-other"
eval_splits="dev-clean dev-other test-clean test-other"
vocab_size=500
model_type=bpe
nj=$(nproc)
experiment=librispeech_medium
exp_dir=
avg=5
train_args=
eval_args=

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  [[ $1 == -h || $1 == --help ]] && { usage; exit 0; }
  [[ $# -ge 2 ]] || { echo "run.sh: option $1 needs a value" >&2; exit 2; }
  case "$1" in
    --stage) stage=$2 ;;
    --stop-stage) stop_stage=$2 ;;
    --data-dir) data_dir=$2 ;;
    --download) download=$2 ;;
    --train-splits) train_splits=$2 ;;
    --valid-splits) valid_splits=$2 ;;
    --eval-splits) eval_splits=$2 ;;
    --vocab-size) vocab_size=$2 ;;
    --nj) nj=$2 ;;
    --experiment) experiment=$2 ;;
    --exp-dir) exp_dir=$2 ;;
    --avg) avg=$2 ;;
    --train-args) train_args=$2 ;;
    --eval-args) eval_args=$2 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done

data_dir=$(mkdir -p "$data_dir" && cd "$data_dir" && pwd)
exp_dir=${exp_dir:-$repo_root/exp/$experiment}
root="$data_dir/LibriSpeech"
manifest_dir="$data_dir/manifests/librispeech"
tokenizer="$manifest_dir/tokenizer_${model_type}${vocab_size}.model"
stats="$manifest_dir/feature_stats.json"
train_manifests=()
for split in $train_splits; do train_manifests+=("$manifest_dir/$split.jsonl"); done
# The word lists become Hydra lists, e.g. "dev-clean dev-other" -> [dev-clean,dev-other].
hydra_list() { local joined; joined=$(echo $1 | tr ' ' ','); echo "[$joined]"; }
# Overrides may be quoted like shell words: --train-args "a=1 'b=x y'".
eval "train_overrides=($train_args)"
eval "eval_overrides=($eval_args)"

run_stage() { [[ $stage -le $1 && $stop_stage -ge $1 ]]; }

if run_stage 0; then
  echo "stage 0: manifests in $manifest_dir"
  download_flag=()
  [[ $download == true ]] && download_flag=(--download)
  # shellcheck disable=SC2086 # word lists
  python scripts/prepare_librispeech.py --root "$root" --manifest-dir "$manifest_dir" \
    --splits $(echo $train_splits $valid_splits $eval_splits | tr ' ' '\n' | awk '!seen[$0]++') \
    --num-workers "$nj" "${download_flag[@]}"
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

# Both train.py and eval.py read the data through the same data config.
data_overrides=(data=librispeech "paths.data_dir=$data_dir" "data.root=$root" "data.manifest_dir=$manifest_dir"
  "data.vocab_size=$vocab_size" "data.tokenizer_type=$model_type" "data.train_splits=$(hydra_list "$train_splits")"
  "data.valid_splits=$(hydra_list "$valid_splits")" "data.test_splits=$(hydra_list "$eval_splits")")

if run_stage 3; then
  echo "stage 3: train experiment=$experiment into $exp_dir"
  python recipes/librispeech/train.py "experiment=$experiment" "${data_overrides[@]}" "hydra.run.dir=$exp_dir" \
    "${train_overrides[@]}"
fi

if run_stage 4; then
  decode_dir="$exp_dir/decode_avg$avg"
  echo "stage 4: decode $eval_splits with the last $avg checkpoint(s) of $exp_dir/checkpoints into $decode_dir"
  # the GPU when there is one (--eval-args "device=cpu" overrides it)
  device=$(python -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
  python recipes/librispeech/eval.py "${data_overrides[@]}" "checkpoint=$exp_dir/checkpoints" "avg=$avg" \
    "manifests=$(hydra_list "$eval_splits")" "hydra.run.dir=$decode_dir" "device=$device" "${eval_overrides[@]}"
fi
