"""Fake (meta) kernels of the ``asr_plugin`` transducer ops, for FakeTensor tracing (torch.compile, export).

They give the output shapes and dtypes without computing anything. ``register`` runs once the C++ library is
loaded (``extension`` calls it; the library also names this module with ``set_python_module``, and torch
imports it when it meets an op without a fake kernel).
"""

from __future__ import annotations

import torch


def _accumulation(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _log_probs(logits, targets, logit_lengths, target_lengths, blank, vocab, t_offset, bad):
    batch, frames, labels_plus_one, _ = logits.shape
    acc = _accumulation(logits.dtype)
    log_probs = logits.new_empty((batch, frames, labels_plus_one, 2), dtype=acc)  # (N, Tc, U+1, 2)
    denominators = logits.new_empty((batch, frames, labels_plus_one), dtype=acc)  # (N, Tc, U+1)
    return log_probs, denominators


def _tdt_log_probs(logits, targets, logit_lengths, target_lengths, blank, num_durations, sigma, t_offset, bad):
    batch, frames, labels_plus_one, _ = logits.shape
    acc = _accumulation(logits.dtype)
    log_probs = logits.new_empty((batch, frames, labels_plus_one, 2 + num_durations), dtype=acc)  # (N, Tc, U+1, 2 + D)
    denominators = logits.new_empty((batch, frames, labels_plus_one, 2), dtype=acc)  # (N, Tc, U+1, 2)
    return log_probs, denominators


def _alphas_betas(log_probs, logit_lengths, target_lengths, *durations):
    cells = log_probs.shape[:3]
    return log_probs.new_empty(cells), log_probs.new_empty(cells), log_probs.new_empty(cells[:1])


def _logits_grad(*args):
    return None


_FAKES = {
    "asr_plugin::transducer_log_probs": _log_probs,
    "asr_plugin::transducer_alphas_betas": _alphas_betas,
    "asr_plugin::transducer_logits_grad": _logits_grad,
    "asr_plugin::tdt_log_probs": _tdt_log_probs,
    "asr_plugin::tdt_alphas_betas": _alphas_betas,
    "asr_plugin::tdt_logits_grad": _logits_grad,
}
_registered = False


def register() -> None:
    """Register the fake kernels (once) if the ops are defined in this process."""
    global _registered
    if _registered or not hasattr(torch.ops.asr_plugin, "transducer_log_probs"):
        return
    for name, fake in _FAKES.items():
        torch.library.register_fake(name)(fake)
    _registered = True


register()
