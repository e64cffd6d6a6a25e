"""Counting, on any device, the calls that block the host on CUDA: the machinery of the loss's and the training
step's host-sync counts (``scripts/benchmark_loss.py --count-ops``, ``tests/training/test_step_syncs.py``).

On CUDA the host waits for the device at a scalar read (``.item()``, ``bool()``/``int()`` of a tensor:
``aten._local_scalar_dense``), a ``nonzero`` (its output size needs the device's answer), a device-to-host copy
(``.cpu()``, ``.tolist()``, ``.to("cpu")``) and a ``torch.tensor``/``torch.as_tensor`` of Python data (a
blocking host-to-device copy). A :class:`SyncCounter` sees the first two at the dispatch level and the others
at the torch-function level, so it counts on the CPU what the GPU would wait for, conservatively: the same
calls on host tensors count too.
"""

from __future__ import annotations

from collections import Counter

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_FUNCTIONS = frozenset({"tolist", "cpu", "tensor", "as_tensor"})
SYNC_ATEN = frozenset({"aten._local_scalar_dense", "aten.nonzero"})


class _FunctionCalls(TorchFunctionMode):
    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name in SYNC_FUNCTIONS or (name == "to" and self.counter.to_host(args[1:], kwargs)):
            self.counter.calls[name] += 1
        return func(*args, **kwargs)


class _DispatchedOps(TorchDispatchMode):
    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counter.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


class SyncCounter:
    """Counts sync-type calls and every dispatched aten op while entered (re-entrant: enter and exit it around
    each region to count, e.g. from a callback's batch-start and batch-end hooks).

    Args:
        device_moves: whether ``.to(<torch.device cpu>)`` counts as a device-to-host copy. True (the loss's
            count): any ``.to`` naming the CPU. False: only ``.to("cpu")`` spelled as a string, the way this
            project writes host copies; on a CPU run a ``torch.device`` argument is the model's own device
            (``x.to(self.device)``, the per-gradient moves inside ``clip_grad_norm_``), a no-op on a GPU.

    Attributes:
        calls: {function name: count} of the torch-function-level sync calls.
        ops: {aten op: count} of every dispatched op.
    """

    def __init__(self, device_moves: bool = True) -> None:
        self.device_moves = device_moves
        self.calls: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self._modes: list[tuple[_FunctionCalls, _DispatchedOps]] = []

    def to_host(self, args: tuple, kwargs: dict) -> bool:
        targets = (*args, kwargs.get("device"))
        if self.device_moves:
            return any(str(target) == "cpu" for target in targets)
        return any(isinstance(target, str) and target == "cpu" for target in targets)

    def __enter__(self) -> SyncCounter:
        modes = (_FunctionCalls(self), _DispatchedOps(self))
        for mode in modes:
            mode.__enter__()
        self._modes.append(modes)
        return self

    def __exit__(self, *exc_info) -> None:
        for mode in reversed(self._modes.pop()):
            mode.__exit__(*exc_info)

    @property
    def syncs(self) -> dict[str, int]:
        """{call or aten op: count} of the sync-type calls."""
        return {**self.calls, **{name: self.ops[name] for name in SYNC_ATEN if self.ops[name]}}

    @property
    def sync_ops(self) -> int:
        """How many sync-type calls in all."""
        return sum(self.syncs.values())

    @property
    def aten_ops(self) -> int:
        """How many aten ops were dispatched."""
        return sum(self.ops.values())
