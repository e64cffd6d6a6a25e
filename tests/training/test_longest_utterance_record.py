"""A training run records its longest training utterance in every checkpoint (the default chunk length of
transcribe.py, `asr_plugin.evaluation.chunk_length`)."""

from __future__ import annotations

from pathlib import Path

import torch

from asr_plugin.data import read_manifest
from asr_plugin.training import train
from asr_plugin.training.run_start import LONGEST_UTTERANCE_RECORD


def test_checkpoints_record_the_longest_training_utterance(tiny_run):
    cfg = tiny_run(["trainer.limit_train_batches=1", "trainer.max_epochs=1"])
    result = train(cfg)
    longest = max(entry.duration for entry in read_manifest(Path(cfg.data.work_dir) / "train.jsonl"))
    for path in (result["last_model_path"], result["best_model_path"]):
        records = torch.load(path, weights_only=True, mmap=True)["asr_plugin"]
        assert records[LONGEST_UTTERANCE_RECORD] == round(longest, 3) and 0.5 < longest < 30
