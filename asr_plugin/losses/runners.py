"""How the sample-wise loss runs the joint on a group of samples and backpropagates logits gradients.

A runner's ``begin(encoder, predictor, needs)`` opens a group (its rows of the inputs); the group's
``step(t0, t1, keep)`` gives the logits of frames [t0, t1) (one T-chunk, or the whole group), a step's
``backprop(grad)`` turns a logits gradient into that chunk's gradients, and the group's ``finish()`` gives
what can only be formed once every chunk is in. Two runners share this interface, and a third computes the
lattice's log-probs and gradient itself:

* ``GraphRunner`` (any joint): calls the joint with autograd on detached leaves per step and turns the
  logits gradient into input/parameter gradients with ``torch.autograd.grad``;
* ``FusedRunner`` (a joint satisfying ``StandardJoint``): projects the group's frames and label states once
  (with autograd), computes ``output(act(enc_proj + pred_proj))`` per step without an autograd graph over
  the lattice, and writes its backward by hand: the output layer's gradients per step, the projections'
  gradients summed over the lattice into group buffers, and one autograd call through the projections in
  ``finish``. Only the logits and two hidden-sized tensors per cell are alive at once (the graph keeps four);
* ``flash.FlashRunner`` (a standard joint the flash joint can compute, ``flash_declines``): the fused
  runner's projections, then the flash kernels form the group's log-probs and, from the recursions'
  statistics, every gradient, with no logits and no hidden tensor outside registers; its groups have no
  ``step`` (``flash`` is True: the engine calls ``log_probs`` and ``backprop_lattice`` instead).

Which one runs a call is ``runner_choice.make_runner``'s choice.

A ``nn.Module`` joint runs on detached copies of its parameters, swapped in once per pass with
``torch.func.functional_call`` (``Runner.with_leaves``), so hooks registered on the parameters
(``p.register_hook``) fire once per backward, as for any other loss, and not once per step; module forward
hooks still fire on every call (per step for the graph runner, per group for the projections when fused).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, TypeVar, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from .lattices import RNNT, TransducerLattice

Joint = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_Result = TypeVar("_Result")

# Activations the fused runner implements, and those the flash joint's kernels implement.
FUSED_ACTIVATIONS = ("tanh", "relu", "gelu")
FLASH_ACTIVATIONS = ("tanh", "relu")


@runtime_checkable
class JointShape(Protocol):
    """What a joint declares about its output and hidden size, for the loss's checks and memory plan.

    ``hidden_dim``: H, the size of the per-cell hidden activation (the planner's estimate; without it the loss
    assumes max(H_e, H_p)). ``num_extra_outputs``: the scores each cell emits after its V token scores, e.g. a
    TDT joint's D duration scores (0 for RNN-T); the loss checks it against its lattice's.
    """

    @property
    def hidden_dim(self) -> int: ...

    @property
    def num_extra_outputs(self) -> int: ...


@runtime_checkable
class StandardJoint(JointShape, Protocol):
    """A joint computing
    ``output(dropout(act(project_encoder(enc)[:, :, None] + project_predictor(pred)[:, None])))``, whose
    ``output`` Linear has V + ``num_extra_outputs`` rows (token scores, then e.g. TDT duration scores).

    The sample-wise loss recognises it and runs it fused. ``fused_activation`` is "tanh", "relu" or "gelu"
    (exact), or None when the joint cannot be fused (the loss then calls the joint as any other);
    ``fused_dropout`` is the (inverted) dropout probability on the activations, 0 when inactive (eval mode).
    """

    output: nn.Linear

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor: ...  # (N, T, H_e) -> (N, T, H)

    def project_predictor(self, predictor_out: torch.Tensor) -> torch.Tensor: ...  # (N, U+1, H_p) -> (N, U+1, H)

    @property
    def fused_activation(self) -> str | None: ...

    @property
    def fused_dropout(self) -> float: ...


def flash_declines(joint: Joint, lattice: TransducerLattice | None = None) -> str | None:
    """Why the flash joint cannot compute `joint` over `lattice` (None: it can), as a phrase naming the cause.

    It computes ``output(act(project_encoder(enc) + project_predictor(pred)))`` of a ``StandardJoint`` (detected
    by its interface, like ``runner_choice.make_runner``; this package never imports ``asr_plugin.models``) with
    tanh or relu, no dropout on the activations (the recomputing backward has no mask to replay), no extra
    outputs, over the RNN-T lattice without FastEmit."""
    if not (isinstance(joint, nn.Module) and isinstance(joint, StandardJoint) and isinstance(joint.output, nn.Linear)):
        return f"{type(joint).__name__} is not a standard joint (runners.StandardJoint with an nn.Linear output)"
    if joint.fused_activation not in FLASH_ACTIVATIONS:
        return f"activation {joint.fused_activation!r} (the flash joint implements {FLASH_ACTIVATIONS})"
    if joint.fused_dropout > 0:
        return (
            f"joint dropout {joint.fused_dropout} in training mode (the recomputing backward has no mask to replay; "
            "eval mode, dropout 0 or flash_joint='never' runs it)"
        )
    if joint.num_extra_outputs:
        return f"{joint.num_extra_outputs} extra outputs (a TDT joint: the flash joint computes RNN-T only)"
    plain_rnnt = isinstance(lattice, RNNT) and not lattice.num_extra_outputs and not lattice.fastemit_lambda
    if lattice is not None and not plain_rnnt:
        return f"lattice {lattice!r} (the flash joint computes the RNN-T lattice without FastEmit)"
    return None


def joint_hidden_size(joint: Joint, encoder_dim: int, predictor_dim: int) -> int:
    """H for the memory plan: the joint's declared ``hidden_dim`` (``JointShape``), else max(H_e, H_p)."""
    return joint.hidden_dim if isinstance(joint, JointShape) else max(encoder_dim, predictor_dim)


def check_extra_outputs(joint: Joint, lattice: TransducerLattice) -> None:
    """A joint that declares its extra outputs (``JointShape``) must emit the lattice's (TDT: one per duration)."""
    if isinstance(joint, JointShape) and joint.num_extra_outputs != lattice.num_extra_outputs:
        raise ValueError(
            f"joint.num_extra_outputs = {joint.num_extra_outputs} scores after the token scores, but the "
            f"loss's lattice {lattice!r} needs {lattice.num_extra_outputs}"
        )


@dataclass(frozen=True)
class Needs:
    """Which gradients a pass computes."""

    encoder_out: bool = False
    predictor_out: bool = False
    params: bool = False

    @property
    def any(self) -> bool:
        return self.encoder_out or self.predictor_out or self.params


@dataclass
class StepGrads:
    """Gradients of one step (frames [t0, t0 + Tc) of the group's encoder rows) or of a whole group (t0 = 0)."""

    encoder_out: torch.Tensor | None  # (n, Tc, H_e)
    predictor_out: torch.Tensor | None  # (n, U_g+1, H_p)
    params: list[torch.Tensor | None]  # aligned with the runner's params; None: no contribution


class _CallWithLeaves(nn.Module):
    """Runs a callback as its forward, so ``functional_call`` swaps the joint's parameters around all of it."""

    def __init__(self, joint: nn.Module) -> None:
        super().__init__()
        self.joint = joint

    def forward(self, callback: Callable[[], _Result]) -> _Result:
        return callback()


class _Parameters:
    """The joint's trainable parameters (the loss Function's inputs) and detached leaves standing in for them."""

    def __init__(self, joint: Joint) -> None:
        self.bound = _CallWithLeaves(joint) if isinstance(joint, nn.Module) else None
        named = list(joint.named_parameters()) if self.bound is not None else []
        self.leaves = {f"joint.{name}": p.detach().requires_grad_(p.requires_grad) for name, p in named}
        self.params = tuple(p for _, p in named if p.requires_grad)
        self.trainable_leaves = tuple(leaf for leaf in self.leaves.values() if leaf.requires_grad)
        # Swap each (module, attribute) once, a shared parameter's every module for its one leaf. Neither
        # functional_call's weight tying nor a module reachable by two paths restores the original Parameter
        # objects on exit in torch 2.11.
        by_parameter = {id(p): self.leaves[f"joint.{name}"] for name, p in named}
        modules = self.bound.named_modules() if self.bound is not None else []
        self.swapped = {
            f"{prefix}.{name}": by_parameter[id(p)]
            for prefix, module in modules
            for name, p in module.named_parameters(recurse=False)
        }

    def with_leaves(self, callback: Callable[[], _Result]) -> _Result:
        """callback() with the joint's parameters replaced by the leaves (restored on exit, also on error)."""
        if self.bound is None:
            return callback()
        return torch.func.functional_call(self.bound, self.swapped, (callback,), tie_weights=False)


def _leaf(rows: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """`rows` (a view or gather of a detached input, so already a leaf) as an autograd leaf."""
    return rows.requires_grad_() if requires_grad else rows


def _check_logits(logits, expected: tuple[int, int, int]) -> None:
    """`expected`: (n, Tc, U_g+1)."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 4 or tuple(logits.shape[:3]) != expected:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"joint must return logits of shape (N, T, U+1, V) = {expected + ('V',)}, got {shape}")


def _frames(rows: torch.Tensor, t0: int, t1: int) -> torch.Tensor:
    """rows[:, t0:t1] (n, t1 - t0, H); no slice op for the whole group."""
    return rows if t1 - t0 == rows.shape[1] else rows[:, t0:t1]


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


@dataclass(frozen=True)
class RngState:
    cpu: torch.Tensor
    cuda: torch.Tensor | None
    device: torch.device

    @classmethod
    def capture(cls, device: torch.device) -> RngState:
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), cuda, device)

    @contextmanager
    def replay(self) -> Iterator[None]:
        with torch.random.fork_rng(devices=[self.device] if self.cuda is not None else []):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


def _autograd_grads(
    outputs: list[torch.Tensor], output_grads: list[torch.Tensor], wanted: list[torch.Tensor], flags: list[bool]
) -> list[torch.Tensor | None]:
    """d(outputs)/d(wanted[i]) contracted with `output_grads`, None where flags[i] is False."""
    inputs = [tensor for tensor, flag in zip(wanted, flags) if flag]
    results = iter(torch.autograd.grad(outputs, inputs, output_grads, allow_unused=True) if inputs and outputs else ())
    return [next(results, None) if flag else None for flag in flags]


@dataclass
class _GraphStep:
    """Logits of one step with the joint's autograd graph on detached leaves."""

    encoder_leaf: torch.Tensor  # (n, Tc, H_e)
    predictor_leaf: torch.Tensor  # (n, U_g+1, H_p)
    logits: torch.Tensor  # (n, Tc, U_g+1, V)
    leaves: tuple[torch.Tensor, ...]  # parameter leaves aligned with the runner's params
    needs: Needs

    def backprop(self, grad: torch.Tensor) -> StepGrads:
        needs = self.needs
        flags = [needs.encoder_out, needs.predictor_out] + [needs.params] * len(self.leaves)
        encoder_grad, predictor_grad, *param_grads = _autograd_grads(
            [self.logits], [grad], [self.encoder_leaf, self.predictor_leaf, *self.leaves], flags
        )
        return StepGrads(encoder_grad, predictor_grad, param_grads)


@dataclass
class _GraphGroup:
    runner: GraphRunner
    encoder: torch.Tensor  # (n, T_g, H_e)
    predictor: torch.Tensor  # (n, U_g+1, H_p)
    needs: Needs

    def step(self, t0: int, t1: int, keep: bool) -> _GraphStep:
        """Logits of frames [t0, t1); with `keep`, with the graph for `backprop`."""
        needs = self.needs if keep else Needs()
        encoder = _frames(self.encoder, t0, t1)
        encoder_leaf = _leaf(encoder, needs.encoder_out)
        predictor_leaf = _leaf(self.predictor, needs.predictor_out)
        with torch.set_grad_enabled(needs.any):
            logits = self.runner.joint(encoder_leaf, predictor_leaf)
        _check_logits(logits, (encoder.shape[0], encoder.shape[1], self.predictor.shape[1]))
        if needs.any and self.runner.inplace is None:
            self.runner.inplace = not _graph_saved(logits)
        return _GraphStep(encoder_leaf, predictor_leaf, logits, self.runner.trainable_leaves, needs)

    def finish(self) -> StepGrads:
        return StepGrads(None, None, [None] * len(self.runner.params))  # every step returned its own


class GraphRunner:
    """Any joint: autograd through its graph; steps that are recomputed replay the RNG state (dropout)."""

    name = "graph"
    flash = False
    hidden_copies = 4
    mask_bytes = 0
    records_rng = True

    def __init__(self, joint: Joint) -> None:
        self._parameters = _Parameters(joint)
        self.joint = joint
        self.params = self._parameters.params
        self.trainable_leaves = self._parameters.trainable_leaves
        self.with_leaves = self._parameters.with_leaves
        # Whether the logits gradient may overwrite the logits: decided on the first gradient step (the
        # joint's graph has the same structure for every step).
        self.inplace: bool | None = None

    def begin(self, encoder: torch.Tensor, predictor: torch.Tensor, needs: Needs) -> _GraphGroup:
        """Open a group (inside ``with_leaves``): `needs` of its gradient pass, Needs() for losses only."""
        return _GraphGroup(self, encoder, predictor, needs)


def _activate(pre: torch.Tensor, activation: str) -> torch.Tensor:
    """act(pre); tanh/relu overwrite `pre` (their backward needs only the output)."""
    if activation == "tanh":
        return pre.tanh_()
    if activation == "relu":
        return pre.relu_()
    return F.gelu(pre)


def _activation_backward_(grad: torch.Tensor, kept: torch.Tensor, activation: str) -> torch.Tensor:
    """grad * act'(.) written over `grad` in one pass; `kept` is the tanh/relu output or the GELU input."""
    aten = torch.ops.aten
    if activation == "tanh":
        return aten.tanh_backward.grad_input(grad, kept, grad_input=grad)
    if activation == "relu":
        return aten.threshold_backward.grad_input(grad, kept, 0, grad_input=grad)
    return aten.gelu_backward.grad_input(grad, kept, approximate="none", grad_input=grad)


def _drop_(hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """`hidden` zeroed in place where the dropout `mask` (bool, True = dropped) is set. The 1 / (1 - p) rescale of
    inverted dropout is applied to W_out and its gradient instead, (V, H) tensors rather than (cells, H) ones."""
    return hidden if mask is None else hidden.masked_fill_(mask, 0)


@dataclass
class _FusedStep:
    """One step of a standard joint, computed without an autograd graph."""

    group: FusedGroup
    t0: int
    # (n, Tc, U_g+1, H): act output, dropped units zeroed (tanh/relu), or pre-activation (gelu); None: no backprop
    hidden: torch.Tensor | None
    mask: torch.Tensor | None  # (n, Tc, U_g+1, H) bool dropout mask (True: dropped); None: no dropout or no backprop
    logits: torch.Tensor  # (n, Tc, U_g+1, V)

    def backprop(self, grad: torch.Tensor) -> StepGrads:
        """`grad` (n, Tc, U_g+1, V) in the logits dtype: the output layer's gradients; the projections'
        are summed into the group (``FusedGroup.finish``). Consumes the step (its hidden tensor is overwritten)."""
        group, runner = self.group, self.group.runner
        weight, bias = runner.output_weight, runner.output_bias
        flat_grad = grad.reshape(-1, grad.shape[-1])  # (cells, V)
        output_grads = {}
        if group.needs.params and (weight.requires_grad or (bias is not None and bias.requires_grad)):
            hidden = _drop_(F.gelu(self.hidden), self.mask) if runner.activation == "gelu" else self.hidden
            flat_hidden = hidden.reshape(-1, hidden.shape[-1]).to(grad.dtype)  # (cells, H), what W_out saw (unscaled)
            if weight.requires_grad:
                weight_grad = flat_grad.t().mm(flat_hidden)  # (V, H)
                if self.mask is not None:
                    weight_grad.mul_(runner.dropout_rescale)
                output_grads[id(weight)] = weight_grad.to(weight.dtype)
            if bias is not None and bias.requires_grad:
                output_grads[id(bias)] = flat_grad.sum(0).to(bias.dtype)  # (V,)
            del hidden, flat_hidden
        if group.projected:
            # zero where dropped, so the activation's derivative there (from the zeroed output) never counts
            hidden_grad = _drop_(grad.matmul(runner.rescaled_weight.to(grad.dtype)), self.mask)  # (n, Tc, U_g+1, H)
            group.add_projection_grads(self.t0, _activation_backward_(hidden_grad, self.hidden, runner.activation))
        self.hidden = self.mask = None
        return StepGrads(None, None, [output_grads.get(id(leaf)) for leaf in runner.trainable_leaves])


class FusedGroup:
    """A group's projections (computed once, with autograd) and the sums of their gradients over the lattice."""

    def __init__(self, runner: FusedRunner, encoder: torch.Tensor, predictor: torch.Tensor, needs: Needs) -> None:
        self.runner, self.needs = runner, needs
        self.encoder_leaf = _leaf(encoder, needs.encoder_out)  # (n, T_g, H_e)
        self.predictor_leaf = _leaf(predictor, needs.predictor_out)  # (n, U_g+1, H_p)
        with torch.set_grad_enabled(needs.any):
            self.encoder_proj = runner.joint.project_encoder(self.encoder_leaf)  # (n, T_g, H)
            self.predictor_proj = runner.joint.project_predictor(self.predictor_leaf)  # (n, U_g+1, H)
        # Gradients reach the projections only when they carry a graph (a trainable projection or input).
        self.projected = self.encoder_proj.requires_grad or self.predictor_proj.requires_grad
        # d loss / d projection, summed over U (encoder side, per frame) and over T (predictor side), in float32
        # (or float64) whatever the activations' dtype: (n, T_g, H) and (n, U_g+1, H). Steps cover disjoint
        # frames, so each encoder row is written once; every step adds to every predictor row.
        accumulate = torch.float64 if self.encoder_proj.dtype == torch.float64 else torch.float32
        self.encoder_proj_grad = torch.empty_like(self.encoder_proj, dtype=accumulate) if self.projected else None
        self.predictor_proj_grad = torch.zeros_like(self.predictor_proj, dtype=accumulate) if self.projected else None

    def step(self, t0: int, t1: int, keep: bool) -> _FusedStep:
        """Logits of frames [t0, t1); with `keep`, the hidden activation (and dropout mask) too, for `backprop`.
        The mask is drawn from the global RNG, so a recomputation that replays its state draws the same one."""
        runner = self.runner
        with torch.no_grad():
            # (n, Tc, U_g+1, H)
            pre = _frames(self.encoder_proj, t0, t1).unsqueeze(2) + self.predictor_proj.unsqueeze(1)
            hidden = _activate(pre, runner.activation)
            mask = torch.empty_like(hidden, dtype=torch.bool).bernoulli_(runner.dropout) if runner.dropout else None
            # autocast casts as eager would
            logits = F.linear(_drop_(hidden, mask), runner.rescaled_weight, runner.output_bias)
            kept = pre if runner.activation == "gelu" else hidden
        del pre, hidden
        _check_logits(logits, (self.encoder_leaf.shape[0], t1 - t0, self.predictor_leaf.shape[1]))
        backprop = keep and self.needs.any
        return _FusedStep(self, t0, kept if backprop else None, mask if backprop else None, logits)

    def add_projection_grads(self, t0: int, pre_grad: torch.Tensor) -> None:
        """Add a step's pre-activation gradient (n, Tc, U_g+1, H) into the projections' (broadcast-add backward)."""
        encoder_rows = self.encoder_proj_grad.narrow(1, t0, pre_grad.shape[1])  # the step's frames only
        torch.sum(pre_grad, 2, dtype=encoder_rows.dtype, out=encoder_rows)
        self.predictor_proj_grad.add_(pre_grad.sum(1, dtype=self.predictor_proj_grad.dtype))

    def finish(self) -> StepGrads:
        """The group's encoder/predictor gradients and the projections' parameter gradients (one autograd call)."""
        runner, needs = self.runner, self.needs
        outputs, output_grads = [], []
        pairs = ((self.encoder_proj, self.encoder_proj_grad), (self.predictor_proj, self.predictor_proj_grad))
        for proj, proj_grad in pairs:
            if proj.requires_grad:
                outputs.append(proj)
                output_grads.append(proj_grad.to(proj.dtype))
        flags = [needs.encoder_out, needs.predictor_out] + [needs.params] * len(runner.projection_leaves)
        encoder_grad, predictor_grad, *projection_grads = _autograd_grads(
            outputs, output_grads, [self.encoder_leaf, self.predictor_leaf, *runner.projection_leaves], flags
        )
        by_leaf = {id(leaf): grad for leaf, grad in zip(runner.projection_leaves, projection_grads)}
        return StepGrads(encoder_grad, predictor_grad, [by_leaf.get(id(leaf)) for leaf in runner.trainable_leaves])


class FusedRunner:
    """A ``StandardJoint`` run fused: projections once per group (autograd), act, dropout and the output Linear
    by hand."""

    name = "fused"
    flash = False
    hidden_copies = 2  # per cell: the kept activation and its gradient (GELU: its input, and GELU of it for W_out)
    inplace = True  # nothing saves the logits

    def __init__(self, joint: StandardJoint, activation: str, dropout: float) -> None:
        self._parameters = _Parameters(joint)
        self.joint = joint
        self.params = self._parameters.params
        self.trainable_leaves = self._parameters.trainable_leaves
        self.with_leaves = self._parameters.with_leaves
        self.activation = activation
        # With dropout, the bool mask is kept per cell, and recomputed steps replay the RNG state of the first.
        self.dropout, self.dropout_rescale = dropout, 1.0 / (1.0 - dropout)
        self.mask_bytes = 1 if dropout > 0 else 0
        self.records_rng = dropout > 0
        leaves = self._parameters.leaves
        self.output_weight = leaves[_leaf_name(joint, joint.output.weight)]
        with torch.no_grad():  # W_out / (1 - p): the forward's and the hidden gradient's weight
            self.rescaled_weight = self.output_weight * self.dropout_rescale if dropout > 0 else self.output_weight
        self.output_bias = None if joint.output.bias is None else leaves[_leaf_name(joint, joint.output.bias)]
        output = {id(self.output_weight), id(self.output_bias)}
        self.projection_leaves = tuple(leaf for leaf in self.trainable_leaves if id(leaf) not in output)

    def begin(self, encoder: torch.Tensor, predictor: torch.Tensor, needs: Needs) -> FusedGroup:
        """Open a group (inside ``with_leaves``): `needs` of its gradient pass, Needs() for losses only."""
        return FusedGroup(self, encoder, predictor, needs)


JointGroup = _GraphGroup | FusedGroup


def _leaf_name(joint: nn.Module, parameter: torch.Tensor) -> str:
    return next(f"joint.{name}" for name, p in joint.named_parameters() if p is parameter)


def check_joint(joint: Joint) -> None:
    if not callable(joint):
        raise TypeError(f"joint must be an nn.Module or a callable, got {type(joint).__name__}")
