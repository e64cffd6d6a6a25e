"""The LibriSpeech experiments' schedule against its anchor, torchaudio's librispeech_conformer_rnnt recipe
(examples/asr/librispeech_conformer_rnnt: README.md, train.py, lightning.py, data_module.py; docs/training.md):
composed with Hydra (no training), each experiment trains on at least the anchor's audio, warms up over at
most 10 % of the steps its config implies for 8 GPUs (and, with the stated overrides, for 16), ends at a
decayed lr, and its peak lr follows the stated rules."""

from __future__ import annotations

import math

import pytest
import torch
from hydra.utils import instantiate
from train_configs import compose_train

# LibriSpeech's training splits (hours, OpenSLR 12)
TRAIN_HOURS = {"train-clean-100": 100.6, "train-clean-360": 363.6, "train-other-500": 496.7}
TRAIN_UTTERANCES = 281_241
# the anchor: 160 epochs of the 960 h without speed perturbation, <= 2 utterances per GPU on 32 GPUs, Adam at
# 8e-4, warmup over 40 epochs, x0.96 per epoch over the last 40
ANCHOR_EPOCHS, ANCHOR_UTTERANCES_PER_STEP, ANCHOR_LR = 160, 64, 8e-4
ANCHOR_AUDIO_HOURS = ANCHOR_EPOCHS * sum(TRAIN_HOURS.values())
ANCHOR_END_LR_RATIO = 0.96**40
# icefall's pruned_transducer_stateless5 Large: 30 epochs, each three speed-perturbed copies (0.9, 1.0, 1.1)
ICEFALL_LARGE_AUDIO_HOURS = 30 * sum(TRAIN_HOURS.values()) * (1 / 0.9 + 1 + 1 / 1.1)
# the 16-GPU (or 2-node) overrides that docs/training.md states, per experiment
SIXTEEN_GPUS = {
    "librispeech_medium": ["optim.optimizer.lr=2.8e-3", "optim.scheduler.warmup_steps=4500"],
    "librispeech_large": ["optim.optimizer.lr=2.0e-3", "optim.scheduler.warmup_steps=4500"],
}


def implied_steps(cfg, gpus: int) -> float:
    """A lower bound on the optimizer steps: every step holds at most gpus * max_duration padded seconds."""
    hours = sum(TRAIN_HOURS[split] for split in cfg.data.train_splits)
    return cfg.trainer.max_epochs * hours * 3600 / (gpus * cfg.data.max_duration * cfg.trainer.accumulate_grad_batches)


def lr_factor(cfg, total_steps: int):
    """The experiment's scheduler (instantiated from the config) as a function of the optimizer step."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.optim.optimizer.lr)
    scheduler = instantiate(cfg.optim.scheduler)(optimizer, total_steps=total_steps)
    return scheduler.lr_lambdas[0]


def square_root_rule_lr(cfg, gpus: int) -> float:
    """The anchor's peak lr scaled by sqrt(global batch) at LibriSpeech's mean utterance length (12.3 s)."""
    mean_seconds = sum(TRAIN_HOURS.values()) * 3600 / TRAIN_UTTERANCES
    utterances = gpus * cfg.data.max_duration / mean_seconds
    return ANCHOR_LR * math.sqrt(utterances / ANCHOR_UTTERANCES_PER_STEP)


@pytest.mark.parametrize("experiment", ["librispeech_medium", "librispeech_large"])
@pytest.mark.parametrize("gpus", [8, 16])
def test_schedule_covers_the_anchors_audio_and_warms_up_briefly(experiment, gpus, tmp_path):
    cfg = compose_train(
        [f"experiment={experiment}", *(SIXTEEN_GPUS[experiment] if gpus == 16 else [])], tmp_path=tmp_path
    )
    hours = cfg.trainer.max_epochs * sum(TRAIN_HOURS[split] for split in cfg.data.train_splits)
    assert hours >= ANCHOR_AUDIO_HOURS and hours >= ICEFALL_LARGE_AUDIO_HOURS
    steps = implied_steps(cfg, gpus)
    warmup = cfg.optim.scheduler.warmup_steps
    assert warmup <= 0.10 * steps, (warmup, steps)
    factor = lr_factor(cfg, round(steps))
    assert factor(warmup - 1) == pytest.approx(1.0)  # the peak is the configured lr
    end = factor(round(steps) - 1)
    assert end <= ANCHOR_END_LR_RATIO and end == pytest.approx(cfg.optim.scheduler.min_lr_ratio)


@pytest.mark.parametrize("gpus", [8, 16])
def test_peak_lrs_follow_the_stated_rules(gpus, tmp_path):
    medium = compose_train(
        ["experiment=librispeech_medium", *(SIXTEEN_GPUS["librispeech_medium"] if gpus == 16 else [])],
        tmp_path=tmp_path,
    )
    large = compose_train(
        ["experiment=librispeech_large", *(SIXTEEN_GPUS["librispeech_large"] if gpus == 16 else [])], tmp_path=tmp_path
    )
    assert medium.optim.optimizer.lr == pytest.approx(square_root_rule_lr(medium, gpus), rel=0.02)
    # Large: NeMo's Noam scaling between the sizes, d_model^-0.5
    ratio = math.sqrt(medium.model.d_model / large.model.d_model)
    assert large.optim.optimizer.lr == pytest.approx(medium.optim.optimizer.lr * ratio, rel=0.02)
    assert large.trainer.max_epochs == medium.trainer.max_epochs
