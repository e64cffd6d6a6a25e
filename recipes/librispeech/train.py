"""Trains a Conformer-transducer: ``python train.py`` (tiny model, mini corpus, CPU) or e.g.
``python train.py experiment=librispeech_medium paths.data_dir=/data +loss=samplewise`` (LibriSpeech in
/data/LibriSpeech, all GPUs of the node; ``run.sh`` next to this file runs data preparation, this and decoding).

Configs live in the repository's ``conf/`` (see docs/training.md); outputs go to ``logs/<task_name>/``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import hydra
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig

# paths.root_dir: the checkout holding conf/ (data/ and logs/ are created next to it).
os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parents[2]))

from asr_plugin.training import train  # noqa: E402
from asr_plugin.training.distributed import register_resolvers  # noqa: E402
from asr_plugin.training.signal_stop import StoppedBySignal, describe_stop  # noqa: E402
from asr_plugin.user_errors import HYDRA_DEBUG, exit_on_user_error  # noqa: E402

register_resolvers()  # ${run_id:} in conf/hydra/default.yaml: one run directory per job, for every rank


@rank_zero_only
def report(result: dict) -> None:
    """Where checkpoints and logs went (printed once, by the rank-zero process of a DDP run)."""
    metrics = result["metrics"]
    print(f"run directory:   {result['output_dir']}")
    print(f"best checkpoint: {result['best_model_path'] or '(none)'}")
    print(f"last checkpoint: {result['last_model_path'] or '(none)'}")
    print(f"learning curves: {result['learning_curves'] or '(no CSV logger)'}")
    if result["start_metrics"]:
        print("before training: " + "  ".join(f"{k}={v:.4f}" for k, v in sorted(result["start_metrics"].items())))
    print(f"steps: {result['global_step']}  " + "  ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items())))
    if stop := result["stop"]:
        print(describe_stop(stop))  # what was and was not done
    weights = {"best": f"best checkpoint {result['best_model_path']}", "last": "last weights"}.get(
        result["test_weights"]
    )
    tests = {
        key.removesuffix("/wer").removeprefix("test/") or "test": metrics[key]
        for key in sorted(metrics)
        if key.startswith("test") and key.endswith("/wer")
    }
    if tests:  # one line per test split: on the mini corpus dev and each engine's test split
        print(f"test WER (greedy, {weights}):")
        width = max(len(name) for name in tests)
        for name, wer in tests.items():
            print(f"  {name:<{width}}  {100 * wer:6.2f} %")


@hydra.main(config_path="../../conf", config_name="train", version_base="1.3")
@exit_on_user_error(HYDRA_DEBUG)  # a user error: its message, exit 1 (HYDRA_FULL_ERROR=1: the traceback)
def main(cfg: DictConfig) -> float | None:
    try:
        result = train(cfg)
    except StoppedBySignal as stopped:  # before training (data preparation): there is no run to report
        print(describe_stop(dataclasses.asdict(stopped.stop)))
        raise SystemExit(stopped.stop.exit_status) from None
    report(result)
    if result["stop"]:  # as a process killed by the signal ends: a calling script (run.sh) stops here
        raise SystemExit(result["stop"]["exit_status"])
    # the value a sweeper (e.g. Optuna) minimises
    return result["metrics"].get("val/wer")


if __name__ == "__main__":
    main()
