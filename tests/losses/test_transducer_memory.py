"""The sample-wise loss keeps its promise on memory: a step's heap growth is the input gradients, the
parameter-gradient buffers and at most `memory_budget`, whatever the joint (fused, with dropout, or through
its autograd graph), lattice (RNN-T, TDT), dtype or chunking.

Heap in use is read from glibc (``mallinfo2``: bytes in allocated chunks, mmapped ones included) after every
dispatched op, so transients that live between two ops are seen; a tensor torch frees is returned at once
(no caching allocator on the CPU)."""

import ctypes
import ctypes.util

import pytest
import torch
from loss_joints import TanhJoint
from torch.utils._python_dispatch import TorchDispatchMode

from asr_plugin.losses import RNNT, TDT, samplewise_transducer_loss
from asr_plugin.models import Joint


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallinfo2.restype = _Mallinfo2
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()
pytestmark = pytest.mark.skipif(_LIBC is None, reason="needs glibc >= 2.33 (mallinfo2)")


def heap_bytes() -> int:
    info = _LIBC.mallinfo2()
    return info.uordblks + info.hblkhd


class PeakHeap(TorchDispatchMode):
    """Peak heap in use over the ops dispatched inside the block, relative to its start."""

    def __enter__(self):
        self.start = self.peak = heap_bytes()
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, heap_bytes())
        return out

    @property
    def growth(self) -> int:
        return self.peak - self.start


LATTICES = [
    pytest.param(RNNT(), id="rnnt"),
    pytest.param(TDT((0, 1, 2, 3, 4)), id="tdt"),  # D = 5 duration scores per cell, 6 + D statistics
]


@pytest.mark.parametrize("joint_kind", ["standard", "standard+dropout", "graph"])
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
@pytest.mark.parametrize("budget_mib", [2, 8])  # T-chunks of ~10 / ~40 frames, whole samples
@pytest.mark.parametrize("lattice", LATTICES)
def test_step_stays_within_budget(joint_kind, autocast, budget_mib, lattice):
    torch.manual_seed(0)
    batch, frames, labels, hidden, vocab = 3, 200, 50, 256, 512
    extra = lattice.num_extra_outputs
    if joint_kind == "graph":
        joint = TanhJoint(hidden, hidden, hidden, vocab, extra)  # run through its autograd graph
    else:  # fused; with dropout it also keeps a bool mask per hidden unit of a step
        dropout = 0.2 if joint_kind == "standard+dropout" else 0.0
        joint = Joint(hidden, hidden, hidden, vocab, dropout=dropout, num_extra_outputs=extra)
    encoder_out = torch.randn(batch, frames, hidden, requires_grad=True)
    predictor_out = torch.randn(batch, labels + 1, hidden, requires_grad=True)
    targets = torch.randint(1, vocab, (batch, labels))
    logit_lengths = torch.tensor([frames, frames - 30, frames - 60])
    target_lengths = torch.tensor([labels, labels - 10, labels - 5])
    budget = budget_mib * 2**20

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = samplewise_transducer_loss(
                encoder_out,
                predictor_out,
                joint,
                targets,
                logit_lengths,
                target_lengths,
                memory_budget=budget,
                lattice=lattice,
            )
        loss.backward()
        for tensor in (encoder_out, predictor_out, *joint.parameters()):
            tensor.grad = None

    step()  # warm-up: extension load, oneDNN/MKL scratch buffers
    with PeakHeap() as heap:
        step()
    params = sum(p.nbytes for p in joint.parameters())
    # input gradients, the parameter-gradient buffers and a step's gradient (+ their bf16 casts under autocast)
    fixed = encoder_out.nbytes + predictor_out.nbytes + 3 * params
    assert heap.growth <= fixed + budget + 2**20, (heap.growth / 2**20, fixed / 2**20, budget_mib)
    assert heap.growth >= 0.5 * budget  # the measurement sees the lattice work at all
