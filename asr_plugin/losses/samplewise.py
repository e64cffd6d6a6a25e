"""Sample-wise transducer loss (Braun, McDermott, Hsiao, arXiv 2211.16270), memory bounded.

The full (B, T, U+1, V) logits are never materialised. Samples are processed in groups (sorted by lattice
size, each group padded only to its own max T_b x (U_b+1), sized to ``memory_budget``); per group the joint
runs on detached leaves, the fused kernels give the loss and the logits gradient at once (written over the
logits in place when the joint's graph did not save them), and ``torch.autograd.grad`` turns it into
encoder/predictor/joint-parameter gradients before the next group's logits are allocated. A sample whose
lattice alone exceeds the budget is split over T: pass 1 keeps only the (T, U+1, 2) blank/label
log-probs, pass 2 recomputes each chunk's logits with grad enabled.

Gradients are computed in forward for an upstream gradient of 1 and scaled in backward: exactly per sample
for the encoder/predictor gradients (each sample's slice depends only on that sample), and for the joint
parameters when the upstream gradient is the same for every sample ("mean", "sum", uniform "none");
otherwise the groups are recomputed in backward with the upstream gradient folded into the logits gradient,
under the autocast state of the forward.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from . import _ops
from ._memory import Group, cell_bytes, default_budget, joint_hidden_size, parse_memory_budget, plan_groups
from ._validation import (
    Lattice,
    check_finite,
    check_float_input,
    check_lattice,
    check_options,
    check_same_device,
    check_vocabulary,
    non_finite_samples,
)
from .batched import reduce_losses

Joint = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class _Needs:
    """Which gradients a pass computes."""

    encoder_out: bool = False
    predictor_out: bool = False
    params: bool = False

    @property
    def any(self) -> bool:
        return self.encoder_out or self.predictor_out or self.params


@dataclass
class _Problem:
    encoder_out: torch.Tensor  # (B, T, H_e), detached
    predictor_out: torch.Tensor  # (B, U+1, H_p), detached
    joint: Joint
    params: tuple[torch.Tensor, ...]  # joint parameters that require grad
    lattice: Lattice
    blank: int
    clamp: float | None
    groups: list[Group]
    acc_dtype: torch.dtype
    # RNG state before each (group, chunk) joint call of the first gradient pass, replayed by recomputations
    # so a joint with dropout sees the same masks in every pass.
    rng_states: dict[tuple[int, int], _RngState] = field(default_factory=dict)
    # Whether the logits gradient may overwrite the logits: decided on the first gradient step (the joint's
    # graph has the same structure for every group).
    inplace: bool | None = None


@dataclass
class _Grads:
    encoder_out: torch.Tensor | None  # (B, T, H_e)
    predictor_out: torch.Tensor | None  # (B, U+1, H_p)
    params: list[torch.Tensor | None]


@dataclass(frozen=True)
class _AutocastState:
    device_type: str
    enabled: bool
    dtype: torch.dtype

    @classmethod
    def capture(cls, device_type: str) -> _AutocastState:
        return cls(device_type, torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type))

    def restore(self) -> torch.autocast:
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled)


@dataclass(frozen=True)
class _RngState:
    cpu: torch.Tensor
    cuda: torch.Tensor | None
    device: torch.device

    @classmethod
    def capture(cls, device: torch.device) -> _RngState:
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), cuda, device)

    @contextmanager
    def replay(self) -> Iterator[None]:
        with torch.random.fork_rng(devices=[self.device] if self.cuda is not None else []):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


def _graph_saved(output: torch.Tensor) -> bool:
    """True when a node of `output`'s graph saved its storage for backward (e.g. a joint ending in tanh or
    log_softmax); the logits gradient must then not overwrite it. The graph is the joint's only: its inputs
    are detached leaves."""
    storage = output.untyped_storage().data_ptr()
    seen: set = set()
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if not (name.startswith("_saved_") or name == "saved_tensors"):
                continue
            try:
                value = getattr(node, name)
            except RuntimeError:  # freed or not applicable
                continue
            values = value if isinstance(value, (tuple, list)) else (value,)
            if any(isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() == storage for v in values):
                return True
        stack.extend(next_node for next_node, _ in node.next_functions)
    return False


@dataclass
class _JointStep:
    """Logits of one T-chunk of a group, computed on detached leaves."""

    encoder_leaf: torch.Tensor  # (n, t1 - t0, H_e)
    predictor_leaf: torch.Tensor  # (n, U_g+1, H_p)
    logits: torch.Tensor  # (n, t1 - t0, U_g+1, V)

    @classmethod
    def run(cls, joint: Joint, encoder: torch.Tensor, predictor: torch.Tensor, needs: _Needs) -> _JointStep:
        encoder_leaf = encoder.detach().requires_grad_(needs.encoder_out)
        predictor_leaf = predictor.detach().requires_grad_(needs.predictor_out)
        with torch.set_grad_enabled(needs.any):
            logits = joint(encoder_leaf, predictor_leaf)
        expected = (encoder.shape[0], encoder.shape[1], predictor.shape[1])
        if not isinstance(logits, torch.Tensor) or logits.dim() != 4 or tuple(logits.shape[:3]) != expected:
            shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise ValueError(f"joint must return logits of shape (N, T, U+1, V) = {expected + ('V',)}, got {shape}")
        return cls(encoder_leaf, predictor_leaf, logits)

    def backprop(self, grad: torch.Tensor, params: tuple[torch.Tensor, ...], needs: _Needs) -> list[torch.Tensor | None]:
        """[encoder grad, predictor grad, *param grads], None where not needed or unused."""
        wanted = [self.encoder_leaf, self.predictor_leaf, *params]
        flags = [needs.encoder_out, needs.predictor_out] + [needs.params] * len(params)
        inputs = [tensor for tensor, flag in zip(wanted, flags) if flag]
        results = iter(torch.autograd.grad(self.logits, inputs, grad, allow_unused=True))
        return [next(results) if flag else None for flag in flags]


def _group_rows(tensor: torch.Tensor, group: Group, index: torch.Tensor, length: int) -> torch.Tensor:
    """(n, length, H) rows of the group's samples; a view when the group is one sample."""
    if len(group.samples) == 1:
        return tensor[group.samples[0] : group.samples[0] + 1, :length]
    return tensor[:, :length].index_select(0, index)


def _joint_step(
    problem: _Problem, key: tuple[int, int], encoder: torch.Tensor, predictor: torch.Tensor, needs: _Needs, record: bool
) -> _JointStep:
    """Run the joint on one chunk; `record` stores the RNG state of a gradient pass for later replays."""
    state = problem.rng_states.get(key)
    if state is None:
        if record:
            problem.rng_states[key] = _RngState.capture(encoder.device)
        return _JointStep.run(problem.joint, encoder, predictor, needs)
    with state.replay():
        return _JointStep.run(problem.joint, encoder, predictor, needs)


def _run_group(
    problem: _Problem,
    position: int,
    group: Group,
    index: torch.Tensor,
    scale: torch.Tensor | None,
    needs: _Needs,
    grads: _Grads | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss (n,) of one group (`index`: its sample ids on the device) and its non-finite flags (n,); with
    `scale` (B,), also accumulates the scale-weighted gradients into `grads`."""
    lattice = problem.lattice.select(group.samples, index)
    encoder = _group_rows(problem.encoder_out, group, index, group.frames)
    predictor = _group_rows(problem.predictor_out, group, index, group.labels_plus_one)
    chunks = group.chunks()
    # A group that fits keeps its logits (with graph) from pass 1 to the gradient; chunks recompute them.
    keep = scale is not None and len(chunks) == 1
    pass_one = needs if keep else _Needs()
    pieces, kept = [], None
    for t0, t1 in chunks:
        step = _joint_step(problem, (position, t0), encoder[:, t0:t1], predictor, pass_one, scale is not None)
        pieces.append(_ops.log_probs(step.logits, lattice, problem.blank, t0))
        kept = step if keep else None
        del step
    log_probs = torch.cat([piece[0] for piece in pieces], 1) if len(pieces) > 1 else pieces[0][0]
    denominators = torch.cat([piece[1] for piece in pieces], 1) if len(pieces) > 1 else pieces[0][1]
    del pieces
    bad = non_finite_samples(log_probs, denominators)
    stats = _ops.lattice_stats(log_probs, denominators, lattice)
    if scale is None:
        return stats.nll, bad
    for t0, t1 in chunks:
        step = kept if keep else _joint_step(problem, (position, t0), encoder[:, t0:t1], predictor, needs, False)
        kept = None
        if problem.inplace is None:
            problem.inplace = not _graph_saved(step.logits)
        grad = _ops.logits_grad(
            step.logits, stats, lattice, problem.blank, scale[index], problem.clamp, problem.inplace, t0
        )
        encoder_grad, predictor_grad, *param_grads = step.backprop(grad, problem.params, needs)
        del step, grad
        if encoder_grad is not None:
            grads.encoder_out[:, t0:t1].index_add_(0, index, encoder_grad)
        if predictor_grad is not None:
            grads.predictor_out[:, : group.labels_plus_one].index_add_(0, index, predictor_grad)
        for buffer, param_grad in zip(grads.params, param_grads):
            if buffer is not None and param_grad is not None:
                buffer.add_(param_grad)
    return stats.nll, bad


def _run(problem: _Problem, scale: torch.Tensor | None, needs: _Needs) -> tuple[torch.Tensor, _Grads | None]:
    """Per-sample losses (B,) and, with `scale`, the scale-weighted gradients of every group. Non-finite
    logits are reported once, after all groups (one device sync instead of one per group)."""
    encoder_out, predictor_out = problem.encoder_out, problem.predictor_out
    nll = torch.empty(encoder_out.shape[0], dtype=problem.acc_dtype, device=encoder_out.device)
    grads = None
    if scale is not None:
        grads = _Grads(
            torch.zeros_like(encoder_out) if needs.encoder_out else None,
            torch.zeros_like(predictor_out) if needs.predictor_out else None,
            [torch.zeros_like(p) if needs.params else None for p in problem.params],
        )
    bad = torch.zeros(nll.shape, dtype=torch.bool, device=nll.device)
    for position, group in enumerate(problem.groups):
        index = torch.tensor(group.samples, device=nll.device)
        group_nll, group_bad = _run_group(problem, position, group, index, scale, needs, grads)
        nll.index_copy_(0, index, group_nll)
        bad.index_copy_(0, index, group_bad)
    check_finite(bad)
    return nll, grads


class _SamplewiseTransducerLoss(torch.autograd.Function):
    """(encoder_out, predictor_out, *joint params) -> per-sample nll (B,)."""

    @staticmethod
    def forward(ctx, problem: _Problem, encoder_out: torch.Tensor, predictor_out: torch.Tensor, *params: torch.Tensor):
        needs = _Needs(ctx.needs_input_grad[1], ctx.needs_input_grad[2], any(ctx.needs_input_grad[3:]))
        ones = torch.ones(encoder_out.shape[0], dtype=problem.acc_dtype, device=encoder_out.device)
        nll, grads = _run(problem, ones, needs)
        ctx.problem, ctx.grads, ctx.needs = problem, grads, needs
        ctx.autocast = _AutocastState.capture(encoder_out.device.type)
        return nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: torch.Tensor):
        grads: _Grads | None = ctx.grads
        ctx.grads = None  # scaled in place below; a second backward (retain_graph=True) recomputes everything
        if grads is None:
            grads = _recompute(ctx, grad_nll, ctx.needs)
        else:
            per_sample = grad_nll.view(-1, 1, 1)
            for tensor in (grads.encoder_out, grads.predictor_out):
                if tensor is not None:
                    tensor.mul_(per_sample.to(tensor.dtype))
            if ctx.needs.params and bool((grad_nll != grad_nll[0]).any()):
                # Non-uniform upstream ("none" with arbitrary weights): parameter gradients mix samples.
                grads.params = _recompute(ctx, grad_nll, _Needs(params=True)).params
            else:
                for tensor in grads.params:
                    if tensor is not None:
                        tensor.mul_(grad_nll[0].to(tensor.dtype))
        return (None, grads.encoder_out, grads.predictor_out, *grads.params)


def _recompute(ctx, scale: torch.Tensor, needs: _Needs) -> _Grads:
    """Gradients for upstream `scale` (B,), group by group, under the forward's autocast state."""
    with ctx.autocast.restore():
        return _run(ctx.problem, scale, needs)[1]


def _probe_joint(joint: Joint, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
    """Joint output for one lattice cell: gives V and the logits dtype (autocast aware) before planning."""
    if not callable(joint):
        raise TypeError(f"joint must be an nn.Module or a callable, got {type(joint).__name__}")
    with torch.no_grad():
        return _JointStep.run(joint, encoder_out[:1, :1], predictor_out[:1, :1], _Needs()).logits


def samplewise_transducer_loss(
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    joint: Joint,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: str = "mean",
    clamp: float | None = None,
    memory_budget: int | str | None = None,
) -> torch.Tensor:
    """Transducer loss computed sample-group by sample-group; same values and gradients as
    ``transducer_loss(joint(encoder_out, predictor_out), ...)`` with bounded transient memory.

    Args:
        encoder_out: (B, T, H_e) encoder output.
        predictor_out: (B, U+1, H_p) prediction-network output.
        joint: maps (N, T, H_e), (N, U+1, H_p) to (N, T, U+1, V) logits, independently per sample (no batch
            statistics). Recomputations (T-chunks, non-uniform "none" upstream) replay the RNG state, so
            dropout masks match between passes. Gradients reach every parameter of an ``nn.Module`` joint;
            tensors captured by a plain callable get none.
        targets, logit_lengths, target_lengths, blank, reduction, clamp: as in ``transducer_loss``.
        memory_budget: bytes (int) or a string like "512MiB"/"2GB" bounding the transient memory of one step;
            None: half the free CUDA memory on GPU, 256 MiB on CPU.
    """
    check_options(blank, reduction, clamp)
    budget = parse_memory_budget(memory_budget)
    check_float_input("encoder_out", encoder_out, 3, "(B, T, H_e)")
    check_float_input("predictor_out", predictor_out, 3, "(B, U+1, H_p)")
    if predictor_out.shape[0] != encoder_out.shape[0]:
        raise ValueError(
            f"predictor_out has batch size {predictor_out.shape[0]} but encoder_out has B = {encoder_out.shape[0]}"
        )
    device = encoder_out.device
    check_same_device(device, "encoder_out", predictor_out=predictor_out)
    lattice = check_lattice(
        targets,
        logit_lengths,
        target_lengths,
        batch=encoder_out.shape[0],
        frames=encoder_out.shape[1],
        labels_plus_one=predictor_out.shape[1],
        device=device,
        source="encoder_out",
        labels_source="predictor_out",
    )
    probe = _probe_joint(joint, encoder_out, predictor_out)
    vocab = probe.shape[-1]
    check_vocabulary(lattice, vocab, blank)
    hidden = joint_hidden_size(joint, encoder_out.shape[-1], predictor_out.shape[-1])
    bytes_per_cell = cell_bytes(vocab, probe.dtype, hidden, encoder_out.dtype)
    params = tuple(p for p in joint.parameters() if p.requires_grad) if isinstance(joint, nn.Module) else ()
    problem = _Problem(
        encoder_out=encoder_out.detach(),
        predictor_out=predictor_out.detach(),
        joint=joint,
        params=params,
        lattice=lattice,
        blank=blank,
        clamp=clamp,
        groups=plan_groups(lattice.frames, lattice.labels, budget or default_budget(device), bytes_per_cell),
        acc_dtype=_ops.accumulation_dtype(probe.dtype),
    )
    if torch.is_grad_enabled() and (encoder_out.requires_grad or predictor_out.requires_grad or params):
        nll = _SamplewiseTransducerLoss.apply(problem, encoder_out, predictor_out, *params)
    else:
        nll, _ = _run(problem, None, _Needs())
    return reduce_losses(nll, reduction)
