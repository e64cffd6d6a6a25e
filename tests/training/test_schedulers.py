"""Learning-rate schedules: warmup, decay and the cosine schedule's handling of runs shorter than its warmup."""

from __future__ import annotations

import math

import pytest
import torch

from asr_plugin.training.schedulers import cosine_factor, noam_factor, warmup_cosine


def _lrs(scheduler, steps):
    values = []
    for _ in range(steps):
        values.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return values


def test_cosine_warms_up_linearly_then_decays_to_the_floor():
    assert cosine_factor(0, 4, 20) == pytest.approx(0.25) and cosine_factor(3, 4, 20) == pytest.approx(1.0)
    assert cosine_factor(11, 4, 20, 0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 8 / 16)))
    assert cosine_factor(19, 4, 20, 0.1) == pytest.approx(0.1) and cosine_factor(50, 4, 20, 0.1) == pytest.approx(0.1)


def test_noam_peaks_at_warmup_then_falls_as_inverse_sqrt():
    assert noam_factor(9, 10) == pytest.approx(1.0)
    assert noam_factor(39, 10) == pytest.approx(0.5)
    assert noam_factor(10**6, 10, min_lr_ratio=0.05) == pytest.approx(0.05)


def test_a_run_shorter_than_the_warmup_warms_up_over_its_first_tenth():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.warns(UserWarning, match="warmup_steps=200 >= the run's 20 optimizer steps: .* first 2"):
        scheduler = warmup_cosine(optimizer, warmup_steps=200, total_steps=20)
    lrs = _lrs(scheduler, 20)
    assert lrs[0] == pytest.approx(0.5) and lrs[1] == pytest.approx(1.0) and lrs[-1] < 0.05
    with pytest.warns(UserWarning, match="first 0 instead"):  # fast_dev_run: one step, no warmup
        warmup_cosine(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), 200, total_steps=1)
    with pytest.raises(ValueError, match="total_steps=None"):
        warmup_cosine(optimizer, warmup_steps=10, total_steps=None)


def test_warmup_ratio_is_a_fraction_of_the_run_and_excludes_warmup_steps():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = warmup_cosine(optimizer, warmup_steps=None, total_steps=40, warmup_ratio=0.1, min_lr_ratio=0.05)
    lrs = _lrs(scheduler, 40)  # 4 warmup steps (a tenth of 40), then half a cosine down to 0.05
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0]) and lrs[-1] == pytest.approx(0.05)
    assert lrs[22] == pytest.approx(0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * 19 / 36)))
    with pytest.raises(ValueError, match="set exactly one of them"):
        warmup_cosine(optimizer, warmup_steps=10, total_steps=40, warmup_ratio=0.1)
    with pytest.raises(ValueError, match="warmup_ratio must lie in"):
        warmup_cosine(optimizer, warmup_steps=None, total_steps=40, warmup_ratio=1.5)
