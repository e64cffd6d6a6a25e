"""Decodes test sets with a trained checkpoint (or the average of several):
``python eval.py checkpoint=../../logs/train/runs/<date>_<time>/checkpoints avg=3 decoding.methods=[greedy,beam]``.

Writes recogs-<set>-<method>.txt, errs-<set>-<method>.txt and wer-summary.{tsv,json} to the run
directory (``logs/eval/runs/<date>_<time>``); see docs/decoding.md. ``streaming=true`` (``att_context_size=all``
for every lookahead) or ``streaming=buffered`` scores the sets as streams: docs/streaming.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import hydra
from omegaconf import DictConfig

# paths.root_dir: the checkout holding conf/ (as in train.py, so data/ resolves to the same place).
os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parents[2]))

from asr_plugin.evaluation import evaluate, format_table  # noqa: E402
from asr_plugin.training.distributed import register_resolvers  # noqa: E402
from asr_plugin.user_errors import HYDRA_DEBUG, exit_on_user_error  # noqa: E402

register_resolvers()  # ${run_id:} in conf/hydra/default.yaml


@hydra.main(config_path="../../conf", config_name="eval", version_base="1.3")
@exit_on_user_error(HYDRA_DEBUG)  # a user error: its message, exit 1 (HYDRA_FULL_ERROR=1: the traceback)
def main(cfg: DictConfig) -> float | None:
    result = evaluate(cfg)
    print(format_table(result["rows"]))
    print(f"weights:     {result['weights']}")
    print(f"results in:  {result['output_dir']}")
    return result["rows"][0]["wer"] if result["rows"] else None


if __name__ == "__main__":
    main()
