"""Benchmark cells of the transducer losses: inputs, one forward + backward of joint + loss, and its time, peak
memory, dispatched ops and host syncs (``scripts/benchmark_loss.py`` is the command line).

Modes: ``torchaudio`` (``torchaudio.functional.rnnt_loss`` on the full logits; RNN-T only), ``batched``
(``TransducerLoss("batched")``), ``samplewise`` (``TransducerLoss("samplewise", flash_joint="never")``: the
joint's logits, group by group, over the lattice kernels of the row's backend), ``flash`` (the sample-wise loss
with ``flash_joint="always"``: the flash joint's Triton kernels, no logits; RNN-T and the standard joint only,
on CUDA or under ``TRITON_INTERPRET=1``, other rows are not run) and ``nemo`` (TDT only:
NeMo's own TDT loss on the full logits, ``TDTLossPytorch`` on the CPU, where NeMo has nothing faster, its numba
``TDTLossNumba`` on CUDA). A cell is a dict: B, T, U, V, H, the joint, and D (0: RNN-T; D > 0: the TDT loss with
durations 0..D-1 on a joint emitting V + D scores). The joint is Linear(tanh(enc_proj + pred_proj)) with hidden
size H, either ``asr_plugin.models.Joint`` ("standard": the sample-wise loss runs it fused; "dropout": the same
with dropout 0.1 in training mode, also fused) or an equivalent plain module ("custom": run through its
autograd graph); encoder/predictor outputs have size H. Lengths vary per sample (T_b in [0.7 T, T], U_b in
[0.7 U, U], the first sample at T and U).

CPU: each (cell, mode) runs in a fresh subprocess (``python -m benchmarks.loss REQUEST``); memory is
the peak RSS above the RSS after the inputs were built and one warm-up step ran (the kernel's HWM is reset through
/proc/self/clear_refs); time is the median wall time and the median process CPU time (robust on a shared
machine). CUDA: memory is torch.cuda.max_memory_allocated over the timed steps (inputs included) and time comes
from CUDA events.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple
from unittest import mock

import torch
from torch import nn

from asr_plugin.files import write_atomic
from asr_plugin.losses import RNNT, TDT, Plan, TransducerLattice, TransducerLoss
from asr_plugin.losses.planning import cell_bytes, plan_groups
from asr_plugin.models import Joint
from benchmarks import child_environment
from benchmarks.host_syncs import SyncCounter

MODES = ("torchaudio", "batched", "samplewise", "flash", "nemo")
JOINTS = ("standard", "dropout", "custom")
PAPER = dict(B=1024, T=1000, U=200, V=1024, H=512)
PRESETS = {
    # (the flash mode runs here only under TRITON_INTERPRET=1 on the CPU: the GPU check's dry run of side-by-side)
    "quick": [dict(B=4, T=50, U=10, V=64, H=64, modes=MODES[:4])],
    # the quick cell in TDT (D = 5): the GPU check's dry run of its paper-tdt stage
    "quick-tdt": [dict(B=4, T=50, U=10, V=64, H=64, D=5, modes=("batched", "samplewise"))],
    # the smallest cells that still take the benchmark's every code path (two ragged samples, every mode): the GPU
    # check's dry run, whose test asserts statuses, files and tables, not sizes
    "dry": [dict(B=2, T=8, U=3, V=16, H=16, modes=MODES[:4])],
    "dry-tdt": [dict(B=2, T=8, U=3, V=16, H=16, D=5, modes=("batched", "samplewise"))],
    "cpu-targets": [
        dict(B=8, T=200, U=50, V=256, H=256, modes=MODES[:3]),
        # the memory target's cell: a budget well below the batch's lattice (the CPU default is 256 MiB)
        dict(B=32, T=300, U=60, V=512, H=256, modes=MODES[:3], memory_budget="64MiB"),
    ],
    # TDT (D = 5 durations, Parakeet-TDT's [0, 1, 2, 3, 4]) against our RNN-T at the same shape; NeMo's CPU TDT
    # loss (TDTLossPytorch, whose time grows faster than the lattice: a step of the first cell would take hours)
    # at two smaller cells, beside ours; then the memory target's cell in TDT
    "cpu-tdt": [
        dict(B=8, T=200, U=50, V=256, H=256, D=0, modes=("batched", "samplewise")),
        dict(B=8, T=200, U=50, V=256, H=256, D=5, modes=("batched", "samplewise")),
        dict(B=8, T=20, U=5, V=256, H=256, D=5, modes=("batched", "samplewise", "nemo")),
        dict(B=8, T=50, U=12, V=256, H=256, D=5, modes=("batched", "samplewise", "nemo")),
        dict(B=32, T=300, U=60, V=512, H=256, D=5, modes=("batched", "samplewise"), memory_budget="64MiB"),
    ],
    "gpu-targets": [
        dict(B=32, T=250, U=50, V=1024, H=512, modes=MODES[:3]),
        # > 2^31 logits: torchaudio's int32 indexing cannot run it
        dict(B=32, T=1000, U=200, V=1024, H=512, modes=("batched", "samplewise")),
    ],
    "paper": [
        # The paper's setting. encoder_out (B, T, H) and predictor_out (B, U+1, H) with their gradients take
        # 2 * 4 * 1024 * (1000 + 201) * 512 B = 4.69 GiB in fp32 (2.35 GiB in bf16), so the 5 GiB / 3 GiB
        # targets leave a budget of a few hundred MiB; the second cell is the default budget (1 GiB on CUDA). The
        # third leaves fp32 more room for what the planner does not count (cuBLAS workspaces: 5148 MiB measured
        # at 192 MiB against 4997 MiB planned); a cell whose budget names other dtypes only is skipped.
        dict(PAPER, modes=("samplewise",), memory_budget={"fp32": "192MiB", "bf16-autocast": "512MiB"}),
        dict(PAPER, modes=("samplewise",)),
        dict(PAPER, modes=("samplewise",), memory_budget={"fp32": "160MiB"}),
    ],
    # The shapes of the public transducer-loss benchmark (csukuangfj/transducer-loss-benchmarking: LibriSpeech
    # train-clean-100 batches of 30 utterances, BPE-500, encoder and predictor dim 512), approximated by one
    # long batch: T = 600 frames (24 s at 40 ms, the corpus's longest utterances), U = 150 tokens. The GPU check
    # runs every backend of ours and the flash joint side by side with torchaudio here (flash last: its kernels
    # have never run on a GPU, so a slow step cuts only its own row).
    "benchmark-b30": [dict(B=30, T=600, U=150, V=500, H=512, modes=MODES[:4])],
    # the paper-scale cell in TDT (D = 5), for the GPU check
    "paper-tdt": [
        dict(PAPER, D=5, modes=("samplewise",), memory_budget={"fp32": "192MiB", "bf16-autocast": "512MiB"}),
        dict(PAPER, D=5, modes=("samplewise",)),
    ],
}


class CustomJoint(nn.Module):
    """The standard joint's computation in a plain module: the loss calls it and backpropagates its graph."""

    def __init__(self, hidden: int, vocab: int, num_extra_outputs: int = 0) -> None:
        super().__init__()
        self.hidden_dim, self.num_extra_outputs = hidden, num_extra_outputs
        self.encoder_proj = nn.Linear(hidden, hidden)
        self.predictor_proj = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, vocab + num_extra_outputs)

    def forward(self, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder_proj(encoder_out).unsqueeze(2) + self.predictor_proj(predictor_out).unsqueeze(1)
        return self.output(torch.tanh(hidden))  # (N, T, U+1, V [+ D])


class Inputs(NamedTuple):
    """One cell's loss arguments (``TransducerLoss``'s call signature) and its lattice (the joint emits its extra
    outputs)."""

    encoder_out: torch.Tensor  # (B, T, H)
    predictor_out: torch.Tensor  # (B, U+1, H)
    joint: nn.Module
    targets: torch.Tensor  # (B, U)
    logit_lengths: torch.Tensor  # (B,)
    target_lengths: torch.Tensor  # (B,)
    lattice: TransducerLattice

    def loss_args(self) -> tuple:
        return self[:6]


def cell_lattice(cell: dict) -> TransducerLattice:
    """TDT with durations 0..D-1 for a cell with D > 0 (Parakeet-TDT's [0, 1, 2, 3, 4] for D = 5), else RNN-T."""
    return TDT(tuple(range(cell["D"]))) if cell.get("D") else RNNT()


def make_inputs(cell: dict, device: torch.device, dtype: str) -> Inputs:
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    B, T, U, V, H = (cell[k] for k in "BTUVH")
    lattice = cell_lattice(cell)
    extra = lattice.num_extra_outputs
    # under bf16 autocast an encoder/predictor would hand over bf16 activations
    input_dtype = torch.bfloat16 if dtype == "bf16-autocast" else torch.float32
    encoder_out = torch.randn(B, T, H, generator=generator).to(device, input_dtype).requires_grad_()
    predictor_out = torch.randn(B, U + 1, H, generator=generator).to(device, input_dtype).requires_grad_()
    targets = torch.randint(1, V, (B, U), generator=generator).to(device)
    logit_lengths = torch.randint(int(0.7 * T), T + 1, (B,), generator=generator)
    target_lengths = torch.randint(int(0.7 * U), U + 1, (B,), generator=generator)
    logit_lengths[0], target_lengths[0] = T, U
    kind = cell.get("joint", "standard")
    if kind == "custom":
        joint = CustomJoint(H, V, extra)
    else:  # "dropout": the standard joint in training mode with dropout 0.1 on its activations (run fused)
        joint = Joint(H, H, H, V, dropout=0.1 if kind == "dropout" else 0.0, num_extra_outputs=extra)
    lengths = logit_lengths.to(device), target_lengths.to(device)
    return Inputs(encoder_out, predictor_out, joint.to(device), targets, *lengths, lattice)


LossFn = Callable[..., torch.Tensor]  # TransducerLoss's call signature


def _torchaudio_loss(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths) -> torch.Tensor:
    import torchaudio

    logits = joint(encoder_out, predictor_out).float()  # torchaudio has no bfloat16 kernel
    return torchaudio.functional.rnnt_loss(
        logits, targets.int(), logit_lengths.int(), target_lengths.int(), blank=0, reduction="mean"
    )


def _nemo_tdt_loss(durations: tuple[int, ...]) -> LossFn:
    """NeMo's TDT loss, "mean" over the batch: TDTLossPytorch on the CPU (its ``.cuda()`` calls made no-ops, as
    in tests/losses/test_tdt_nemo.py), the numba TDTLossNumba on CUDA."""
    from nemo.collections.asr.losses.rnnt_pytorch import TDTLossPytorch
    from nemo.collections.asr.parts.numba.rnnt_loss.rnnt_pytorch import TDTLossNumba

    def loss(encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths) -> torch.Tensor:
        acts = joint(encoder_out, predictor_out).float()
        if acts.is_cuda:
            return TDTLossNumba(blank=0, durations=list(durations), reduction="none")(
                acts, targets, logit_lengths, target_lengths
            ).mean()
        with mock.patch.object(torch.Tensor, "cuda", lambda self, *args, **kwargs: self):
            return TDTLossPytorch(blank=0, durations=list(durations), reduction="none")(
                acts=acts, labels=targets, act_lens=logit_lengths, label_lens=target_lengths
            ).mean()

    return loss


# Our modes: each runs once per backend of the run; "flash" over the Triton kernels only (the flash joint's).
OUR_MODES = ("batched", "samplewise")
FLASH_BACKEND = "triton"


def make_loss(mode: str, lattice: TransducerLattice, memory_budget=None, backend: str = "auto") -> LossFn:
    """The loss of `mode` ("mean" reduction); ours are ``TransducerLoss`` objects (``last_plan`` after a call) over
    the kernels of `backend` (``asr_plugin.losses.backends``; other modes ignore it)."""
    if mode in OUR_MODES:
        return TransducerLoss(mode, lattice, memory_budget=memory_budget, backend=backend, flash_joint="never")
    if mode == "flash":
        return TransducerLoss(
            "samplewise", lattice, memory_budget=memory_budget, backend=FLASH_BACKEND, flash_joint="always"
        )
    if mode == "torchaudio":
        if not isinstance(lattice, RNNT):
            raise ValueError("torchaudio has no TDT loss: the torchaudio mode runs RNN-T cells (D = 0) only")
        return _torchaudio_loss
    if mode == "nemo":
        if not isinstance(lattice, TDT):
            raise ValueError("the nemo mode runs TDT cells (D > 0) only")
        return _nemo_tdt_loss(lattice.durations)
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def step(loss: LossFn, inputs: Inputs, dtype: str) -> None:
    """One forward + backward of joint + loss."""
    device_type = inputs.encoder_out.device.type
    autocast = (
        torch.autocast(device_type, dtype=torch.bfloat16) if dtype == "bf16-autocast" else contextlib.nullcontext()
    )
    with autocast:
        value = loss(*inputs.loss_args())
    value.backward()
    for tensor in (inputs.encoder_out, inputs.predictor_out, *inputs.joint.parameters()):
        tensor.grad = None


def rss_kib(field: str) -> int:
    """A memory field of this process from /proc/self/status in KiB: "VmRSS" (now) or "VmHWM" (the peak since
    the last ``/proc/self/clear_refs`` reset)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def plan_figures(plan: Plan | None) -> dict:
    """A sample-wise plan's figures for the results (empty without one)."""
    if plan is None:
        return {}
    return dict(
        runner=plan.runner,
        groups=len(plan.groups),
        steps=plan.steps,
        recomputed_fraction=plan.recomputed_fraction(),
        estimated_peak_bytes=plan.estimated_peak_bytes(),
    )


def measure_cpu_in_process(cell: dict, mode: str, dtype: str, repeats: int, memory_budget) -> dict:
    torch.set_num_threads(torch.get_num_threads())
    inputs = make_inputs(cell, torch.device("cpu"), dtype)
    loss = make_loss(mode, inputs.lattice, memory_budget, cell.get("backend") or "auto")
    step(loss, inputs, dtype)  # warm-up (and extension load)
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    baseline = rss_kib("VmRSS")
    times, cpu_times = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        step(loss, inputs, dtype)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    peak = (rss_kib("VmHWM") - baseline) * 1024
    # CPU time (all threads) is what a shared machine cannot inflate by making the process wait
    result = dict(time_s=statistics.median(times), cpu_s=statistics.median(cpu_times), peak_bytes=peak)
    return dict(result, **plan_figures(getattr(loss, "last_plan", None)))


def measure_cpu(cell: dict, mode: str, dtype: str, repeats: int, memory_budget) -> dict:
    """Run one (cell, mode) in a fresh interpreter so peak RSS is not polluted by earlier cells."""
    request = json.dumps(dict(cell=cell, mode=mode, dtype=dtype, repeats=repeats, memory_budget=memory_budget))
    env = child_environment()
    process = subprocess.run([sys.executable, "-m", __name__, request], capture_output=True, text=True, env=env)
    if process.returncode != 0:
        return dict(
            error=process.stderr.strip().splitlines()[-1] if process.stderr.strip() else f"exit {process.returncode}"
        )
    return json.loads(process.stdout.strip().splitlines()[-1])


def measure_cuda(cell: dict, mode: str, dtype: str, repeats: int, memory_budget) -> dict:
    device = torch.device("cuda")
    inputs = None
    try:
        inputs = make_inputs(cell, device, dtype)
        loss = make_loss(mode, inputs.lattice, memory_budget, cell.get("backend") or "auto")
        step(loss, inputs, dtype)  # warm-up (and extension build/load, Triton compilation)
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(loss, inputs, dtype)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        peak = torch.cuda.max_memory_allocated()
        result = dict(time_s=statistics.median(times), peak_bytes=peak, transient_bytes=peak - baseline)
        return dict(result, **plan_figures(getattr(loss, "last_plan", None)))
    except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
        return dict(error=str(error).splitlines()[0][:120])
    finally:
        inputs = None
        torch.cuda.empty_cache()


def run_cells(
    preset: str,
    device: str,
    dtype: str,
    repeats: int,
    modes: set[str],
    joints: list[str],
    memory_budget=None,
    backends: tuple[str, ...] = ("auto",),
):
    """Measure every (cell, joint, mode, backend) of `preset` that `modes`, `joints` and `backends` select (our
    modes once per backend, the flash joint once over Triton where ``flash_runs`` says it can, torchaudio and NeMo
    once, with backend None); rows as they come."""
    measure = measure_cuda if device == "cuda" else measure_cpu
    for cell in PRESETS[preset]:
        if isinstance(cell.get("memory_budget"), dict) and dtype not in cell["memory_budget"]:
            continue
        for joint in joints:
            for mode in (m for m in cell["modes"] if m in modes):
                if mode == "flash" and not flash_runs(cell, joint, device):
                    continue
                per_backend = backends if mode in OUR_MODES else (FLASH_BACKEND,) if mode == "flash" else (None,)
                for backend in per_backend:
                    shape = dict({k: cell[k] for k in "BTUVH"}, D=cell.get("D", 0), joint=joint, backend=backend)
                    budget = memory_budget or cell.get("memory_budget")
                    budget = budget.get(dtype) if isinstance(budget, dict) else budget
                    budget = budget if mode in ("samplewise", "flash") else None
                    yield dict(shape, mode=mode, memory_budget=budget, **measure(shape, mode, dtype, repeats, budget))


def flash_runs(cell: dict, joint: str, device: str) -> bool:
    """Whether the flash mode can run this cell: RNN-T, the standard joint (dropout and the custom joint are
    declined by the loss), on CUDA, or on the CPU under Triton's interpreter (the dry run)."""
    on_device = device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"
    return on_device and joint == "standard" and not cell.get("D")


def count_ops(batch: int, memory_budget: str, joint: str, num_durations: int = 0) -> dict:
    """aten ops and host-sync calls (``benchmarks.host_syncs``) of one sample-wise forward + backward (CPU, fp32)."""
    cell = dict(B=batch, T=50, U=10, V=64, H=64, D=num_durations, joint=joint)
    inputs = make_inputs(cell, torch.device("cpu"), "fp32")
    loss = make_loss("samplewise", inputs.lattice, memory_budget)
    step(loss, inputs, "fp32")  # extension load, first-call caches
    with SyncCounter() as counter:
        step(loss, inputs, "fp32")
    aten = counter.aten_ops
    return dict(
        cell,
        memory_budget=memory_budget,
        aten_ops=aten,
        aten_ops_per_sample=aten / batch,
        sync_ops=counter.sync_ops,
        syncs=counter.syncs,
    )


def print_op_counts(joints: list[str], num_durations: int = 0) -> None:
    """Ops per sample-wise step at B=16 and 64: about one sample per group (1 MiB) and T-chunked samples
    (256 KiB) for the custom joint at these sizes (the fused standard joint fits more per group)."""
    rows = [
        count_ops(batch, budget, joint, num_durations)
        for joint in joints
        for budget in ("1MiB", "256KiB")
        for batch in (16, 64)
    ]
    header = (
        f"{'joint':<9} {'D':>2} {'B':>4} {'budget':>7} {'aten ops':>9} {'per sample':>10} {'sync ops':>8}  sync calls"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['joint']:<9} {row['D']:>2} {row['B']:>4} {row['memory_budget']:>7} {row['aten_ops']:>9} "
            f"{row['aten_ops_per_sample']:>10.1f} {row['sync_ops']:>8}  {row['syncs']}"
        )


def print_host_overhead(joints: list[str], num_durations: int = 0) -> None:
    """Host (Python + dispatcher) time per sample of a sample-wise forward + backward, one sample per group, at
    lattice sizes (T=8, U=3, H=8, V=16) where the kernels cost almost nothing: the floor a GPU step cannot go
    below when its kernels are small (many T-chunks at a tight budget). Process CPU time, best of 5, 1 thread."""
    torch.set_num_threads(1)
    batch = 256
    print(f"{'joint':<9} {'D':>2} {'budget':<17} {'host us per sample':>18}")
    for joint in joints:
        inputs = make_inputs(
            dict(B=batch, T=8, U=3, V=16, H=8, D=num_durations, joint=joint), torch.device("cpu"), "fp32"
        )
        inputs.logit_lengths.fill_(8)
        inputs.target_lengths.fill_(3)
        for budget, label in ((None, "whole sample"), ("2KiB", "2 KiB: T-chunks")):
            loss = TransducerLoss("samplewise", inputs.lattice, memory_budget=budget, max_samples_per_group=1)
            step(loss, inputs, "fp32")
            times = []
            for _ in range(5):
                start = time.process_time()
                step(loss, inputs, "fp32")
                times.append(time.process_time() - start)
            print(f"{joint:<9} {num_durations:>2} {label:<17} {min(times) / batch * 1e6:>18.0f}")


def print_loss_only(repeats: int, num_durations: int = 5) -> None:
    """Forward + backward of the batched loss alone on given logits (no joint), RNN-T against TDT with durations
    0..D-1, at the TDT target's cell (B=8, T=200, U=50, V=256, the benchmark's lengths): process CPU time of each
    of `repeats` steps after a warm-up, the two lattices interleaved."""
    from asr_plugin.losses import transducer_loss

    B, T, U, V = 8, 200, 50, 256
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(B, T, U + 1, V + num_durations, generator=generator)
    targets = torch.randint(1, V, (B, U), generator=generator)
    logit_lengths = torch.randint(int(0.7 * T), T + 1, (B,), generator=generator)
    target_lengths = torch.randint(int(0.7 * U), U + 1, (B,), generator=generator)
    logit_lengths[0], target_lengths[0] = T, U
    lattices = {
        "rnnt": (logits[..., :V].contiguous(), RNNT()),
        f"tdt D={num_durations}": (logits, TDT(range(num_durations))),
    }
    times: dict[str, list[float]] = {name: [] for name in lattices}
    for round_ in range(repeats + 1):
        for name, (scores, lattice) in lattices.items():
            scores = scores.detach().requires_grad_()
            start = time.process_time()
            transducer_loss(scores, targets, logit_lengths, target_lengths, lattice).backward()
            if round_:  # the first round warms up (extension load)
                times[name].append(time.process_time() - start)
    print(f"{'lattice':<10} {'median CPU s':>12} {'min':>7} {'max':>7}  (B={B}, T={T}, U={U}, V={V}, loss only)")
    for name, values in times.items():
        print(f"{name:<10} {statistics.median(values):>12.3f} {min(values):>7.3f} {max(values):>7.3f}")
    ratio = statistics.median(times[f"tdt D={num_durations}"]) / statistics.median(times["rnnt"])
    print(f"TDT / RNN-T: {ratio:.2f}x")


def print_plans(num_durations: int = 0) -> None:
    """Groups, steps and estimated peak of the sample-wise plan at B=1024, T=1000, U=200, H=512, V=1024 (the
    benchmark's lengths; TDT with `num_durations` D > 0), per joint, dtype and budget; nothing is allocated."""
    B, T, U, V, H = (PAPER[k] for k in "BTUVH")
    generator = torch.Generator().manual_seed(0)
    (
        torch.randn(B, T, H, generator=generator),
        torch.randn(B, U + 1, H, generator=generator),
    )  # same draws as make_inputs
    torch.randint(1, V, (B, U), generator=generator)
    frames = torch.randint(int(0.7 * T), T + 1, (B,), generator=generator)
    labels = torch.randint(int(0.7 * U), U + 1, (B,), generator=generator)
    frames[0], labels[0] = T, U
    frames, labels = tuple(frames.tolist()), tuple(labels.tolist())
    values = cell_lattice({"D": num_durations}).values_per_cell()  # the lattice's statistics per cell
    print(
        f"{'joint':<9} {'D':>2} {'dtype':<6} {'budget':>7} {'cell B':>7} {'groups':>6} {'steps':>6} {'recomputed':>10} "
        f"{'cells %':>7} {'step MiB':>9} {'inputs+grads GiB':>16} {'est. peak GiB':>13}"
    )
    for joint, copies in (("standard", 2), ("custom", 4)):
        for dtype, size in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            fixed = 2 * B * (T + U + 1) * H * size.itemsize
            for budget in (160 * 2**20, 192 * 2**20, 512 * 2**20, 2**30):
                per_cell = cell_bytes(V + num_durations, size, H, size, copies, 0, values)
                plan = plan_groups(frames, labels, budget, per_cell, fixed_bytes=fixed)
                recomputed = plan.steps - len(plan.groups)  # chunks other than each group's last (kept from pass 1)
                print(
                    f"{joint:<9} {num_durations:>2} {dtype:<6} {budget // 2**20:>4}MiB {per_cell.total:>7} {len(plan.groups):>6} "
                    f"{plan.steps:>6} {recomputed:>10} {100 * plan.recomputed_fraction():>7.0f} {plan.step_bytes() / 2**20:>9.0f} "
                    f"{fixed / 2**30:>16.2f} {plan.estimated_peak_bytes() / 2**30:>13.2f}"
                )


def print_table(rows: list[dict]) -> None:
    header = (
        f"{'B':>5} {'T':>5} {'U':>4} {'V':>5} {'H':>4} {'D':>2}  {'joint':<8} {'mode':<11} {'backend':<7} {'budget':>8} {'time (s)':>9} "
        f"{'peak (MiB)':>11}  note"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        if "error" in row:
            result = f"{'-':>9} {'-':>11}  {row['error']}"
        else:
            result = f"{row['time_s']:>9.3f} {row['peak_bytes'] / 2**20:>11.1f}"
            result += f"  cpu {row['cpu_s']:.3f} s" if "cpu_s" in row else ""
        budget = row.get("memory_budget") or "default"
        shape = f"{row['B']:>5} {row['T']:>5} {row['U']:>4} {row['V']:>5} {row['H']:>4} {row.get('D', 0):>2}"
        print(f"{shape}  {row['joint']:<8} {row['mode']:<11} {row.get('backend') or '-':<7} {budget:>8} {result}")


def plot(rows: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    ok = [row for row in rows if "error" not in row]
    labels = [f"{r['mode']}\nB{r['B']} T{r['T']} U{r['U']} D{r.get('D', 0)}" for r in ok]
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(max(8, len(ok) * 1.2), 4))
    time_axis.bar(labels, [r["time_s"] for r in ok])
    time_axis.set_ylabel("median time (s)")
    memory_axis.bar(labels, [r["peak_bytes"] / 2**20 for r in ok])
    memory_axis.set_ylabel("peak memory (MiB)")
    for axis in (time_axis, memory_axis):
        axis.tick_params(axis="x", labelrotation=90, labelsize=7)
    figure.tight_layout()
    write_atomic(path, figure.savefig)


def _measure_request(request: str) -> None:
    """One CPU measurement, in the subprocess ``measure_cpu`` starts; prints its JSON result."""
    print(json.dumps(measure_cpu_in_process(**json.loads(request))))


if __name__ == "__main__":
    _measure_request(sys.argv[1])
