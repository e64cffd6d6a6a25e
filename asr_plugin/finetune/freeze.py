"""Freezing the encoder, or its front-end and first N Conformer blocks, for fine-tuning."""

from __future__ import annotations

import logging

from torch import nn

from asr_plugin.models import Transducer

log = logging.getLogger(__name__)


def _keep_in_eval_mode(module: nn.Module, _inputs: object) -> None:
    # Frozen batch norms must not update their running statistics while the rest trains.
    module.eval()


def freeze_encoder_layers(model: Transducer, num_layers: int) -> list[str]:
    """Freezes the encoder bottom-up; returns the frozen parameter names (relative to `model`).

    Args:
        num_layers: -1 freezes the whole encoder (subsampling and every Conformer block); N > 0 the
            subsampling front-end and the first N Conformer blocks (the front-end feeds them, so it is
            always frozen with them); 0 freezes nothing.

    Frozen parameters get ``requires_grad=False`` (the optimizer leaves them out); batch norms inside
    the frozen part stay in eval mode, so their running statistics do not change either.
    """
    blocks = model.encoder.blocks
    if not isinstance(num_layers, int) or num_layers < -1 or num_layers > len(blocks):
        raise ValueError(
            f"freeze_encoder_layers={num_layers!r} must be -1, 0 or 1..{len(blocks)} (the encoder has {len(blocks)} blocks)"
        )
    if num_layers == 0:
        return []
    if num_layers == -1:
        parts: dict[str, nn.Module] = {"encoder": model.encoder}
    else:
        parts = {"encoder.subsampling": model.encoder.subsampling}
        names = {id(module): name for name, module in model.named_modules()}
        parts.update({names[id(blocks[i])]: blocks[i] for i in range(num_layers)})
    frozen = []
    for prefix, part in parts.items():
        for name, param in part.named_parameters():
            param.requires_grad_(False)
            frozen.append(f"{prefix}.{name}")
        for module in part.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.register_forward_pre_hook(_keep_in_eval_mode)
    log.info("froze %d encoder parameter tensors (%s)", len(frozen), ", ".join(parts))
    return frozen
