"""Training: the Lightning module, learning-rate schedules and the Hydra entry point ``train(cfg)``."""

from asr_plugin.training.lightning_module import TransducerModule
from asr_plugin.training.schedulers import warmup_cosine, warmup_noam
from asr_plugin.training.train import train

__all__ = ["TransducerModule", "train", "warmup_cosine", "warmup_noam"]
