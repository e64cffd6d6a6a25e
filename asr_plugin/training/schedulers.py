"""Step-wise learning-rate schedules (warmup + Noam, warmup + cosine) as ``LambdaLR`` factories.

Both return a multiplier of each param group's base lr, so the fine-tuning groups (pretrained and new
parameters at different lrs) follow the same shape. The configs in ``conf/optim/`` hold them as
``_partial_`` targets; the Lightning module calls them with the optimizer (and the number of optimizer
steps of the whole run for the cosine schedule) and steps them every optimizer step. `check_schedule_fits_corpus`
is the schedule's own check of a training config, before anything runs.
"""

from __future__ import annotations

import math
import warnings

from omegaconf import DictConfig, OmegaConf
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

# Below this a LibriSpeech run is using the CPU demo's schedule (200 warmup steps): the LibriSpeech experiments
# warm up for 10k-15k steps, and a transducer at full lr after a few hundred steps of 600 s batches tends to diverge.
MIN_LIBRISPEECH_WARMUP = 1000


def _check(warmup_steps: int, min_lr_ratio: float) -> None:
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must lie in [0, 1], got {min_lr_ratio}")


def noam_factor(step: int, warmup_steps: int, min_lr_ratio: float = 0.0) -> float:
    """Linear warmup to 1 at `warmup_steps`, then ``sqrt(warmup_steps / step)`` decay, floored at `min_lr_ratio`.

    This is the Noam schedule of "Attention is all you need" normalised so that the peak equals the
    configured lr (ESPnet's ``WarmupLR``), which keeps the lr readable in configs instead of hiding it
    behind ``d_model ** -0.5``.
    """
    step = step + 1  # LambdaLR calls with 0 before the first update; the first update must not use lr 0
    if warmup_steps == 0:
        return max(1.0 / math.sqrt(step), min_lr_ratio)
    factor = min(step / warmup_steps, math.sqrt(warmup_steps / step))
    return factor if step <= warmup_steps else max(factor, min_lr_ratio)


def cosine_factor(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0) -> float:
    """Linear warmup to 1 at `warmup_steps`, then half a cosine down to `min_lr_ratio` at `total_steps`."""
    step = step + 1
    if step <= warmup_steps:
        return step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_noam(
    optimizer: Optimizer, warmup_steps: int = 1000, min_lr_ratio: float = 0.0, total_steps: int | None = None
) -> LambdaLR:
    """``LambdaLR`` with :func:`noam_factor`; `total_steps` is accepted (and ignored) so both schedules share a call."""
    _check(warmup_steps, min_lr_ratio)
    return LambdaLR(optimizer, lambda step: noam_factor(step, warmup_steps, min_lr_ratio))


def warmup_cosine(
    optimizer: Optimizer,
    warmup_steps: int | None = 1000,
    min_lr_ratio: float = 0.0,
    total_steps: int | None = None,
    warmup_ratio: float | None = None,
) -> LambdaLR:
    """``LambdaLR`` with :func:`cosine_factor`; `total_steps` is the run's optimizer steps (the Trainer's estimate).

    Set one of `warmup_steps` and `warmup_ratio` (NeMo's ``sched.warmup_ratio``: that fraction of the run's
    steps, at least 1), so that a fine-tuning preset fits runs of any length.
    """
    if total_steps is None or total_steps < 1:
        raise ValueError(f"total_steps={total_steps}: the cosine schedule needs the run's number of optimizer steps")
    if (warmup_steps is None) == (warmup_ratio is None):
        raise ValueError(
            f"warmup_steps={warmup_steps}, warmup_ratio={warmup_ratio}: set exactly one of them (null the other)"
        )
    if warmup_ratio is not None:
        if not 0.0 <= warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must lie in [0, 1), got {warmup_ratio}")
        warmup_steps = max(1, round(warmup_ratio * total_steps))
    _check(warmup_steps, min_lr_ratio)
    if warmup_steps >= total_steps:
        # a quick check (fast_dev_run, limit_train_batches, a few max_steps) is shorter than the warmup: warm up
        # over its first tenth instead of refusing to run
        shortened = total_steps // 10
        warnings.warn(
            f"warmup_steps={warmup_steps} >= the run's {total_steps} optimizer steps: warming up over "
            f"the first {shortened} instead",
            stacklevel=2,
        )
        warmup_steps = shortened
    return LambdaLR(optimizer, lambda step: cosine_factor(step, warmup_steps, total_steps, min_lr_ratio))


def check_schedule_fits_corpus(cfg: DictConfig) -> None:
    """Refuses a LibriSpeech run from scratch with the demo's warmup (``data=librispeech`` without
    ``experiment=...``). Fine-tuning (``cfg.finetune``) starts from trained weights and may warm up briefly."""
    warmup = OmegaConf.select(cfg, "optim.scheduler.warmup_steps")
    if cfg.get("finetune"):
        return
    if OmegaConf.select(cfg, "data.corpus") == "librispeech" and warmup is not None and warmup < MIN_LIBRISPEECH_WARMUP:
        raise ValueError(
            f"optim.scheduler.warmup_steps={warmup} is the CPU demo's warmup, too short for LibriSpeech: train with "
            "`experiment=librispeech_medium` (or librispeech_large), which sets the optimiser, schedule and "
            f"SpecAugment for it, or set optim.scheduler.warmup_steps>={MIN_LIBRISPEECH_WARMUP} yourself"
        )
