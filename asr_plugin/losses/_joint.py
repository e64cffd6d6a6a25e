"""How the sample-wise loss runs the joint on one step (a group's T-chunk) and backpropagates a logits gradient.

Two runners share one interface:

* ``GraphRunner`` (any joint): calls the joint with autograd on detached leaves and turns the logits
  gradient into input/parameter gradients with ``torch.autograd.grad``;
* ``FusedRunner`` (a joint satisfying ``StandardJoint``): computes the step's projections with autograd,
  then ``output(act(enc_proj + pred_proj))`` without an autograd graph over the lattice, and its backward by
  hand (the activation is recomputed from the kept hidden tensor), so only the logits and two hidden-sized
  tensors per cell are alive at once instead of the graph's four.

Both run a ``nn.Module`` joint through ``torch.func.functional_call`` on detached copies of its parameters, so
hooks registered on the parameters (``p.register_hook``) fire once per backward, as for any other loss, and
not once per step; module forward hooks still fire on every step.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

Joint = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# Activations the fused runner implements; hidden-sized copies alive per lattice cell in its backward.
FUSED_ACTIVATIONS = {"tanh": 2, "relu": 2, "gelu": 3}


@runtime_checkable
class StandardJoint(Protocol):
    """A joint computing ``output(act(project_encoder(enc)[:, :, None] + project_predictor(pred)[:, None]))``.

    The sample-wise loss recognises it and runs it fused. ``fused_activation`` is "tanh", "relu" or "gelu"
    (exact), or None when the joint cannot be fused right now (e.g. dropout active in training); the loss
    then calls the joint as any other.
    """

    output: nn.Linear

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor: ...  # (N, T, H_e) -> (N, T, H)

    def project_predictor(self, predictor_out: torch.Tensor) -> torch.Tensor: ...  # (N, U+1, H_p) -> (N, U+1, H)

    @property
    def fused_activation(self) -> str | None: ...


@dataclass(frozen=True)
class Needs:
    """Which gradients a pass computes."""

    encoder_out: bool = False
    predictor_out: bool = False
    params: bool = False

    @property
    def any(self) -> bool:
        return self.encoder_out or self.predictor_out or self.params


StepGrads = tuple  # (encoder grad | None, predictor grad | None, [param grad | None, ...] aligned with params)


class _Bound(nn.Module):
    """Calls a method of the joint, so ``functional_call`` can swap its parameters for any method."""

    def __init__(self, joint: nn.Module) -> None:
        super().__init__()
        self.joint = joint

    def forward(self, method: str, *args: torch.Tensor) -> torch.Tensor:
        return getattr(self.joint, method)(*args)


class _Parameters:
    """The joint's trainable parameters (the loss Function's inputs) and detached leaves standing in for them."""

    def __init__(self, joint: Joint) -> None:
        self.bound = _Bound(joint) if isinstance(joint, nn.Module) else None
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
        self.joint = joint

    def call(self, method: str, *args: torch.Tensor) -> torch.Tensor:
        if self.bound is None:
            return self.joint(*args)
        return torch.func.functional_call(self.bound, self.swapped, (method, *args), tie_weights=False)


def _leaf(rows: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """`rows` (a view or gather of a detached input, so already a leaf) as an autograd leaf."""
    return rows.requires_grad_() if requires_grad else rows


def _check_logits(logits, encoder: torch.Tensor, predictor: torch.Tensor) -> None:
    expected = (encoder.shape[0], encoder.shape[1], predictor.shape[1])
    if not isinstance(logits, torch.Tensor) or logits.dim() != 4 or tuple(logits.shape[:3]) != expected:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"joint must return logits of shape (N, T, U+1, V) = {expected + ('V',)}, got {shape}")


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


@dataclass
class _GraphStep:
    """Logits of one step with the joint's autograd graph on detached leaves."""

    encoder_leaf: torch.Tensor  # (n, Tc, H_e)
    predictor_leaf: torch.Tensor  # (n, U_g+1, H_p)
    logits: torch.Tensor  # (n, Tc, U_g+1, V)
    leaves: tuple[torch.Tensor, ...]  # parameter leaves aligned with the runner's params

    def backprop(self, grad: torch.Tensor, needs: Needs) -> StepGrads:
        wanted = [self.encoder_leaf, self.predictor_leaf, *self.leaves]
        flags = [needs.encoder_out, needs.predictor_out] + [needs.params] * len(self.leaves)
        inputs = [tensor for tensor, flag in zip(wanted, flags) if flag]
        results = iter(torch.autograd.grad(self.logits, inputs, grad, allow_unused=True))
        encoder_grad, predictor_grad, *param_grads = [next(results) if flag else None for flag in flags]
        return encoder_grad, predictor_grad, param_grads


class GraphRunner:
    """Any joint: autograd through its graph; steps that are recomputed replay the RNG state (dropout)."""

    hidden_copies = 4
    records_rng = True

    def __init__(self, joint: Joint) -> None:
        self._parameters = _Parameters(joint)
        self.params = self._parameters.params
        # Whether the logits gradient may overwrite the logits: decided on the first gradient step (the
        # joint's graph has the same structure for every step).
        self.inplace: bool | None = None

    def step(self, encoder: torch.Tensor, predictor: torch.Tensor, needs: Needs) -> _GraphStep:
        encoder_leaf = _leaf(encoder, needs.encoder_out)
        predictor_leaf = _leaf(predictor, needs.predictor_out)
        with torch.set_grad_enabled(needs.any):
            logits = self._parameters.call("forward", encoder_leaf, predictor_leaf)
        _check_logits(logits, encoder, predictor)
        if needs.any and self.inplace is None:
            self.inplace = not _graph_saved(logits)
        return _GraphStep(encoder_leaf, predictor_leaf, logits, self._parameters.trainable_leaves)


def _activate(pre: torch.Tensor, activation: str) -> torch.Tensor:
    """act(pre); tanh/relu overwrite `pre` (their backward needs only the output)."""
    if activation == "tanh":
        return pre.tanh_()
    if activation == "relu":
        return pre.relu_()
    return F.gelu(pre)


@dataclass
class _FusedStep:
    """One step of a standard joint: projections with their graph, the lattice part without one."""

    encoder_leaf: torch.Tensor  # (n, Tc, H_e)
    predictor_leaf: torch.Tensor  # (n, U_g+1, H_p)
    encoder_proj: torch.Tensor  # (n, Tc, H), with graph
    predictor_proj: torch.Tensor  # (n, U_g+1, H), with graph
    hidden: torch.Tensor | None  # (n, Tc, U_g+1, H): act output (tanh/relu) or pre-activation (gelu)
    logits: torch.Tensor  # (n, Tc, U_g+1, V)
    runner: FusedRunner

    def backprop(self, grad: torch.Tensor, needs: Needs) -> StepGrads:
        """`grad` (n, Tc, U_g+1, V) in the logits dtype; consumes the step (the hidden tensor is overwritten)."""
        runner, activation = self.runner, self.runner.activation
        weight, bias = runner.output_weight, runner.output_bias
        flat_grad = grad.reshape(-1, grad.shape[-1])  # (cells, V)
        output_grads = {}
        if needs.params and (weight.requires_grad or (bias is not None and bias.requires_grad)):
            hidden = F.gelu(self.hidden) if activation == "gelu" else self.hidden
            flat_hidden = hidden.reshape(-1, hidden.shape[-1]).to(grad.dtype)  # (cells, H)
            if weight.requires_grad:
                output_grads[id(weight)] = flat_grad.t().mm(flat_hidden).to(weight.dtype)  # (V, H)
            if bias is not None and bias.requires_grad:
                output_grads[id(bias)] = flat_grad.sum(0).to(bias.dtype)  # (V,)
            del hidden, flat_hidden
        hidden_grad = grad.matmul(weight.to(grad.dtype))  # (n, Tc, U_g+1, H)
        if activation == "gelu":
            pre_grad = torch.ops.aten.gelu_backward(hidden_grad, self.hidden)
        elif activation == "tanh":
            pre_grad = hidden_grad.mul_(self.hidden.mul_(self.hidden).neg_().add_(1))  # (1 - tanh^2)
        else:
            pre_grad = hidden_grad.mul_(self.hidden.sign_())  # relu: 1 where the output is positive
        self.hidden = None
        outputs, output_grads_list = [], []
        for proj, reduce_dim in ((self.encoder_proj, 2), (self.predictor_proj, 1)):
            if proj.requires_grad:
                outputs.append(proj)
                output_grads_list.append(pre_grad.sum(reduce_dim).to(proj.dtype))  # broadcast-add backward
        del pre_grad
        wanted = [self.encoder_leaf, self.predictor_leaf, *runner.projection_leaves]
        flags = [needs.encoder_out, needs.predictor_out] + [needs.params] * len(runner.projection_leaves)
        inputs = [tensor for tensor, flag in zip(wanted, flags) if flag]
        results = iter(
            torch.autograd.grad(outputs, inputs, output_grads_list, allow_unused=True) if inputs and outputs else ()
        )
        encoder_grad, predictor_grad, *projection_grads = [next(results, None) if flag else None for flag in flags]
        projection_grads = iter(projection_grads)
        param_grads = [
            output_grads.get(id(leaf)) if leaf is weight or leaf is bias else next(projection_grads)
            for leaf in runner.trainable_leaves
        ]
        return encoder_grad, predictor_grad, param_grads


class FusedRunner:
    """A ``StandardJoint`` run fused: per step, projections (autograd), then act and the output Linear by hand."""

    records_rng = False  # nothing random: a fused joint has no active dropout
    inplace = True  # nothing saves the logits

    def __init__(self, joint: StandardJoint, activation: str) -> None:
        self._parameters = _Parameters(joint)
        self.params = self._parameters.params
        self.activation = activation
        self.hidden_copies = FUSED_ACTIVATIONS[activation]
        leaves = self._parameters.leaves
        self.output_weight = leaves[_leaf_name(joint, joint.output.weight)]
        self.output_bias = None if joint.output.bias is None else leaves[_leaf_name(joint, joint.output.bias)]
        self.trainable_leaves = self._parameters.trainable_leaves
        output = {id(self.output_weight), id(self.output_bias)}
        self.projection_leaves = tuple(leaf for leaf in self.trainable_leaves if id(leaf) not in output)

    def step(self, encoder: torch.Tensor, predictor: torch.Tensor, needs: Needs) -> _FusedStep:
        encoder_leaf = _leaf(encoder, needs.encoder_out)
        predictor_leaf = _leaf(predictor, needs.predictor_out)
        with torch.set_grad_enabled(needs.any):
            encoder_proj = self._parameters.call("project_encoder", encoder_leaf)  # (n, Tc, H)
            predictor_proj = self._parameters.call("project_predictor", predictor_leaf)  # (n, U_g+1, H)
        with torch.no_grad():
            pre = encoder_proj.unsqueeze(2) + predictor_proj.unsqueeze(1)  # (n, Tc, U_g+1, H)
            hidden = _activate(pre, self.activation)
            logits = F.linear(hidden, self.output_weight, self.output_bias)  # autocast casts as eager would
            kept = pre if self.activation == "gelu" else hidden
        del pre, hidden
        _check_logits(logits, encoder, predictor)
        kept = kept if needs.any else None
        return _FusedStep(encoder_leaf, predictor_leaf, encoder_proj, predictor_proj, kept, logits, self)


def _leaf_name(joint: nn.Module, parameter: torch.Tensor) -> str:
    return next(f"joint.{name}" for name, p in joint.named_parameters() if p is parameter)


def make_runner(joint: Joint) -> GraphRunner | FusedRunner:
    """The fused runner for a standard joint that can be fused now, else the graph runner."""
    if not callable(joint):
        raise TypeError(f"joint must be an nn.Module or a callable, got {type(joint).__name__}")
    if isinstance(joint, nn.Module) and isinstance(joint, StandardJoint) and isinstance(joint.output, nn.Linear):
        activation = joint.fused_activation
        if activation in FUSED_ACTIVATIONS:
            return FusedRunner(joint, activation)
    return GraphRunner(joint)
