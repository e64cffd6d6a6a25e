"""The flash joint's loss: ``flash_transducer_loss(encoder_out, predictor_out, joint, ...)`` is the RNN-T loss of
a standard joint (``runners.StandardJoint``: ``output(act(project_encoder(enc) + project_predictor(pred)))``)
computed by the ``flash_joint`` kernels, so no (B, T, U+1, V) tensor exists in forward or backward: per lattice
cell only the two log-probs, the denominator, alpha and beta (float32) are kept, as ``RNNT.values_per_cell``.

The projections run through autograd (their own parameters and the inputs get gradients as usual); the
activation, the output layer and the loss are one autograd Function whose backward recomputes the logits tile by
tile. It declines, by name, what it does not implement: joint dropout (no mask to replay), activations other than
tanh and relu, TDT joints (extra outputs). It needs the Triton backend's device: CUDA tensors, or CPU tensors
under ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from .._validation import check_finite, check_options, check_sequences, check_vocabulary
from ..backends import resolve_backend
from ..batched import reduce_losses
from ..lattices import RNNT, loss_lattice
from ..runners import StandardJoint
from . import ops
from .configs import flash_config
from .flash_joint import ACTIVATIONS, flash_grads_kernel, flash_log_probs_kernel


def flash_declines(joint) -> str | None:
    """Why the flash joint cannot run `joint` (None: it can)."""
    if not isinstance(joint, StandardJoint) or not isinstance(joint.output, torch.nn.Linear):
        return f"{type(joint).__name__} is not a standard joint (runners.StandardJoint with an nn.Linear output)"
    if joint.fused_activation not in ACTIVATIONS:
        return f"activation {joint.fused_activation!r} (the flash joint implements {ACTIVATIONS})"
    if joint.fused_dropout > 0:
        return (
            f"joint dropout {joint.fused_dropout} (the recomputation has no mask to replay; use the sample-wise loss)"
        )
    if joint.num_extra_outputs:
        return f"{joint.num_extra_outputs} extra outputs (a TDT joint: the flash joint computes RNN-T only)"
    return None


class _FlashRNNTLoss(torch.autograd.Function):
    """(enc_proj (N, T, H), pred_proj (N, U+1, H), W_out (V, H), b (V,) or None) -> nll (N,)."""

    @staticmethod
    def forward(ctx, enc_proj, pred_proj, weight, bias, sequences, blank: int, activation: str, clamp: float):
        N, T, H = enc_proj.shape
        U1, V = pred_proj.shape[1], weight.shape[0]
        config = flash_config()
        log_probs = enc_proj.new_empty((N, T, U1, 2), dtype=torch.float32)
        denominators = enc_proj.new_empty((N, T, U1), dtype=torch.float32)
        bad = torch.zeros(N, dtype=torch.bool, device=enc_proj.device)
        targets, logit_lengths, target_lengths = sequences.tensors()
        args = (enc_proj, pred_proj, weight, weight if bias is None else bias, targets, logit_lengths, target_lengths)
        with ops.launch_device(enc_proj.device):
            flash_log_probs_kernel[config.grid(N * T, U1)](
                *args,
                log_probs,
                denominators,
                bad.view(torch.uint8),
                T,
                U1,
                targets.shape[1],
                H,
                V,
                blank,
                HAS_BIAS=bias is not None,
                ACT=activation,
                BLOCK_U=config.block_u,
                BLOCK_V=config.block_v,
                BLOCK_K=config.block_k,
                num_warps=config.num_warps,
            )
        check_finite(bad)
        alphas, betas, nll = ops.transducer_alphas_betas(log_probs, logit_lengths, target_lengths)
        ctx.save_for_backward(enc_proj, pred_proj, weight, bias, log_probs, denominators, alphas, betas, nll)
        ctx.sequences, ctx.blank, ctx.activation, ctx.clamp, ctx.config = sequences, blank, activation, clamp, config
        return nll.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll):
        enc_proj, pred_proj, weight, bias, log_probs, denominators, alphas, betas, nll = ctx.saved_tensors
        N, T, H = enc_proj.shape
        U1, V = pred_proj.shape[1], weight.shape[0]
        config = ctx.config
        targets, logit_lengths, target_lengths = ctx.sequences.tensors()
        grads = [torch.zeros_like(tensor, dtype=torch.float32) for tensor in (enc_proj, pred_proj, weight)]
        bias_grad = torch.zeros(V, dtype=torch.float32, device=weight.device)
        with ops.launch_device(enc_proj.device):
            flash_grads_kernel[config.grid(N * T, U1)](
                enc_proj,
                pred_proj,
                weight,
                weight if bias is None else bias,
                targets,
                logit_lengths,
                target_lengths,
                log_probs,
                denominators,
                alphas,
                betas,
                nll,
                grad_nll.float().contiguous(),
                *grads,
                bias_grad,
                T,
                U1,
                targets.shape[1],
                H,
                V,
                ctx.blank,
                ctx.clamp,
                HAS_BIAS=bias is not None,
                ACT=ctx.activation,
                BLOCK_U=config.block_u,
                BLOCK_V=config.block_v,
                BLOCK_K=config.block_k,
                num_warps=config.num_warps,
            )
        enc_grad, pred_grad, weight_grad = (g.to(t.dtype) for g, t in zip(grads, (enc_proj, pred_proj, weight)))
        return (
            enc_grad,
            pred_grad,
            weight_grad,
            None if bias is None else bias_grad.to(bias.dtype),
            None,
            None,
            None,
            None,
        )


def flash_transducer_loss(
    encoder_out: torch.Tensor,  # (B, T, H_e)
    predictor_out: torch.Tensor,  # (B, U+1, H_p)
    joint: StandardJoint,
    targets: torch.Tensor,  # (B, U)
    logit_lengths: torch.Tensor,  # (B,)
    target_lengths: torch.Tensor,  # (B,)
    lattice: RNNT | Mapping[str, Any] | None = None,
    blank: int = 0,
    reduction: str = "mean",
) -> torch.Tensor:
    """The RNN-T loss of ``joint(encoder_out, predictor_out)``, equal to ``transducer_loss`` of those logits in
    value and in every gradient (inputs, projections, output layer), with per-cell memory independent of V.
    `lattice`: an ``RNNT`` (its clamp is honoured); TDT and FastEmit are declined by name."""
    check_options(blank, reduction)
    lattice = loss_lattice(lattice)
    if not isinstance(lattice, RNNT) or lattice.fastemit_lambda:
        raise ValueError(f"flash joint: computes the RNN-T lattice without FastEmit, got {lattice!r}")
    clamp = lattice.clamp
    resolve_backend(encoder_out.device, "triton")
    reason = flash_declines(joint)
    if reason is not None:
        raise ValueError(f"flash joint: cannot run this joint: {reason}")
    sequences = check_sequences(
        targets,
        logit_lengths,
        target_lengths,
        batch=encoder_out.shape[0],
        frames=encoder_out.shape[1],
        labels_plus_one=predictor_out.shape[1],
        device=encoder_out.device,
        source="encoder_out",
        labels_source="predictor_out",
    )
    check_vocabulary(sequences, joint.output.out_features, blank, 0)
    enc_proj = joint.project_encoder(encoder_out).contiguous()  # (B, T, H)
    pred_proj = joint.project_predictor(predictor_out).contiguous()  # (B, U+1, H)
    nll = _FlashRNNTLoss.apply(
        enc_proj,
        pred_proj,
        joint.output.weight,
        joint.output.bias,
        sequences,
        blank,
        joint.fused_activation,
        0.0 if clamp is None else float(clamp),
    )
    return reduce_losses(nll, reduction)
