#!/usr/bin/env bash
# LibriSpeech transducer recipe, ESPnet style: prepare -> tokenizer -> stats -> train -> decode.
#
#   bash recipes/librispeech/run.sh [--stage 0] [--stop-stage 4] [--data-dir DIR] [--work-dir DIR]
#        [--download false] [--train-splits "train-clean-100 train-clean-360 train-other-500"]
#        [--valid-splits "dev-clean dev-other"] [--eval-splits "dev-clean dev-other test-clean test-other"]
#        [--vocab-size 500] [--nj N] [--experiment librispeech_medium] [--exp-dir exp/<experiment>] [--avg 5]
#        [--train-args "hydra overrides for train.py"] [--eval-args "hydra overrides for eval.py"]
#
# The corpus is DATA_DIR/LibriSpeech and is only read (it may be read-only); manifests, tokenizer and stats
# go to --work-dir (default: data.work_dir of conf/data/librispeech.yaml, under this checkout's data/).
# Stages: 0 manifests (optional download into DATA_DIR), 1 tokenizer, 2 feature stats (all three through
# scripts/prepare_data.py with the training configuration, so stage 3 finds what they made), 3 train
# (conf/experiment/<experiment> into --exp-dir, keeping the --avg best checkpoints, at least 5), 4 decode the
# --eval-splits with their average (into <exp-dir>/decode_avg<avg>). Stages 0-2 reuse what exists (nothing is
# overwritten); rerun stage 3 with --train-args "ckpt_path=last" to resume a killed run. SIGTERM or Ctrl+C
# reach the running stage: training writes a checkpoint at its next step and run.sh stops (status 143 or 1).
# Examples (docs/training.md):
#   bash recipes/librispeech/run.sh --data-dir /data --work-dir /shared/asr/librispeech --train-args "trainer.devices=8"
#   bash recipes/librispeech/run.sh --stage 4 --avg 3 --eval-args "decoding.methods=[greedy,beam] decoding.beam=8"
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"
export PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}"

stage=0
stop_stage=4
data_dir="$repo_root/data"
work_dir=
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

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  [[ $1 == -h || $1 == --help ]] && { usage; exit 0; }
  [[ $# -ge 2 ]] || { echo "run.sh: option $1 needs a value" >&2; exit 2; }
  case "$1" in
    --stage) stage=$2 ;;
    --stop-stage) stop_stage=$2 ;;
    --data-dir) data_dir=$2 ;;
    --work-dir) work_dir=$2 ;;
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

[[ $download == true ]] && mkdir -p "$data_dir"  # the download goes there; otherwise the corpus must exist
data_dir=$(cd "$data_dir" 2>/dev/null && pwd) || { echo "run.sh: --data-dir $data_dir does not exist" >&2; exit 2; }
exp_dir=${exp_dir:-$repo_root/exp/$experiment}
# The word lists become Hydra lists, e.g. "dev-clean dev-other" -> [dev-clean,dev-other].
hydra_list() { local joined; joined=$(echo $1 | tr ' ' ','); echo "[$joined]"; }
# Overrides may be quoted like shell words: --train-args "a=1 'b=x y'".
eval "train_overrides=($train_args)"
eval "eval_overrides=($eval_args)"

# Preparation, training and decoding read the data through the same data config.
data_overrides=(data=librispeech "paths.data_dir=$data_dir" "data.root=$data_dir/LibriSpeech"
  "data.vocab_size=$vocab_size" "data.tokenizer_type=$model_type" "data.train_splits=$(hydra_list "$train_splits")"
  "data.valid_splits=$(hydra_list "$valid_splits")" "data.test_splits=$(hydra_list "$eval_splits")")
[[ -n $work_dir ]] && data_overrides+=("data.work_dir=$(mkdir -p "$work_dir" && cd "$work_dir" && pwd)")

run_stage() { [[ $stage -le $1 && $stop_stage -ge $1 ]]; }
# Each stage's command runs as a child that receives the SIGTERM or SIGINT sent to this script (a scheduler,
# `docker stop`, `kill`, Ctrl+C): training writes a checkpoint at its next step boundary and exits 143 (SIGINT: 1),
# and with `set -e` no later stage runs. Job control (set -m) gives the child the default SIGINT handling that
# a background command of a script otherwise lacks.
child=
forward_signal() { if [[ -n $child ]]; then kill -"$1" "$child" 2>/dev/null || true; fi; }
trap 'forward_signal TERM' TERM
trap 'forward_signal INT' INT
in_child() {
  set -m; "$@" & child=$!; set +m
  local status
  while :; do  # a trapped signal interrupts `wait`; wait again until the child itself has ended
    wait "$child" && status=0 || status=$?
    kill -0 "$child" 2>/dev/null || break
  done
  child=
  if [[ $status -ne 0 ]]; then echo "run.sh: $1 ${2:-} exited with status $status; stopping" >&2; fi
  return "$status"
}
# scripts/prepare_data.py composes the training configuration (experiment, data and train overrides), so the
# files it makes are the ones stage 3 looks for; it derives their paths itself.
prepare() { in_child python scripts/prepare_data.py "$@" "experiment=$experiment" "${data_overrides[@]}" "${train_overrides[@]}"; }

if run_stage 0; then
  echo "stage 0: manifests"
  download_flag=()
  [[ $download == true ]] && download_flag=(--download)
  prepare --steps manifests --num-workers "$nj" "${download_flag[@]}"
fi

if run_stage 1; then
  echo "stage 1: tokenizer"
  prepare --steps tokenizer
fi

if run_stage 2; then
  echo "stage 2: feature stats"
  prepare --steps stats --num-workers "$nj"
fi

if run_stage 3; then
  echo "stage 3: train experiment=$experiment into $exp_dir"
  # stage 4 averages --avg checkpoints: keep that many best ones when it is more than conf/callbacks/default.yaml's 5
  keep=()
  if (( avg > 5 )); then keep=("callbacks.model_checkpoint.save_top_k=$avg"); fi
  in_child python recipes/librispeech/train.py "experiment=$experiment" "${data_overrides[@]}" "hydra.run.dir=$exp_dir" \
    "${keep[@]}" "${train_overrides[@]}"
fi

if run_stage 4; then
  decode_dir="$exp_dir/decode_avg$avg"
  echo "stage 4: decode $eval_splits with the last $avg checkpoint(s) of $exp_dir/checkpoints into $decode_dir"
  # the GPU when there is one (--eval-args "device=cpu" overrides it)
  device=$(python -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
  in_child python recipes/librispeech/eval.py "${data_overrides[@]}" "checkpoint=$exp_dir/checkpoints" "avg=$avg" \
    "manifests=$(hydra_list "$eval_splits")" "hydra.run.dir=$decode_dir" "device=$device" "${eval_overrides[@]}"
fi
