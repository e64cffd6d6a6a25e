"""Benchmark the transducer losses: forward + backward of joint + loss, peak memory and median time.

Modes: torchaudio batched (``torchaudio.functional.rnnt_loss`` on the full logits), ours batched
(``transducer_loss``), ours sample-wise (``samplewise_transducer_loss``). The joint is
Linear(tanh(enc_proj + pred_proj)) with hidden size H, either ``asr_plugin.models.Joint`` ("standard": the
sample-wise loss runs it fused; "dropout": the same with dropout 0.1 in training mode, also fused) or an
equivalent plain module ("custom": run through its autograd graph);
encoder/predictor outputs have size H. Lengths vary per sample (T_b in [0.7 T, T], U_b in [0.7 U, U], the
first sample at T and U).

CPU: each (cell, mode) runs in a fresh subprocess; memory is the peak RSS above the RSS after the inputs
were built and one warm-up step ran (the kernel's HWM is reset through /proc/self/clear_refs); time is the
median wall time and, in the note, the median process CPU time (robust on a shared machine).
CUDA: memory is torch.cuda.max_memory_allocated over the timed steps (inputs included) and time comes
from CUDA events.

    python scripts/benchmark_loss.py --device cpu --preset cpu-targets
    python scripts/benchmark_loss.py --device cuda --preset gpu-targets --dtype bf16-autocast
    python scripts/benchmark_loss.py --device cuda --preset paper --dtype fp32   # B=1024, T=1000, U=200
    python scripts/benchmark_loss.py --count-ops     # dispatched ops and host syncs per sample-wise step
    python scripts/benchmark_loss.py --plan          # the planner's figures for the paper-scale cell, no run
    python scripts/benchmark_loss.py --host-overhead --joints standard,custom   # host time per sample (CPU)

``--count-ops`` runs one sample-wise forward + backward on the CPU at B=16 and B=64 under a
TorchDispatchMode and a TorchFunctionMode and counts the aten ops and the calls that block the host on
CUDA (scalar reads ``.item()``/``bool()``, ``nonzero``, device-to-host copies ``.cpu()``/``.tolist()``/
``.to("cpu")``, and ``torch.tensor``/``torch.as_tensor`` of Python data, a host-to-device copy). It
counts on the CPU what the GPU would dispatch, so it needs no GPU.

Results: a table on stdout, JSON (and a PNG when matplotlib is installed) under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from asr_plugin.host_syncs import SyncCounter  # noqa: E402
from asr_plugin.losses import samplewise_transducer_loss, transducer_loss  # noqa: E402
from asr_plugin.models import Joint as StandardJoint  # noqa: E402

MODES = ("torchaudio", "batched", "samplewise")
JOINTS = ("standard", "dropout", "custom")
PRESETS = {
    "quick": [dict(B=4, T=50, U=10, V=64, H=64, modes=MODES)],
    "cpu-targets": [
        dict(B=8, T=200, U=50, V=256, H=256, modes=MODES),
        # the memory target's cell: a budget well below the batch's lattice (the CPU default is 256 MiB)
        dict(B=32, T=300, U=60, V=512, H=256, modes=MODES, memory_budget="64MiB"),
    ],
    "gpu-targets": [
        dict(B=32, T=250, U=50, V=1024, H=512, modes=MODES),
        # > 2^31 logits: torchaudio's int32 indexing cannot run it
        dict(B=32, T=1000, U=200, V=1024, H=512, modes=("batched", "samplewise")),
    ],
    "paper": [
        # The paper's setting. encoder_out (B, T, H) and predictor_out (B, U+1, H) with their gradients take
        # 2 * 4 * 1024 * (1000 + 201) * 512 B = 4.69 GiB in fp32 (2.35 GiB in bf16), so the 5 GiB / 3 GiB
        # targets leave a budget of a few hundred MiB; the second cell is the default budget (1 GiB on CUDA). The
        # third leaves fp32 more room for what the planner does not count (cuBLAS workspaces: 5148 MiB measured
        # at 192 MiB against 4997 MiB planned); a cell whose budget names other dtypes only is skipped.
        dict(B=1024, T=1000, U=200, V=1024, H=512, modes=("samplewise",), memory_budget={"fp32": "192MiB", "bf16-autocast": "512MiB"}),
        dict(B=1024, T=1000, U=200, V=1024, H=512, modes=("samplewise",)),
        dict(B=1024, T=1000, U=200, V=1024, H=512, modes=("samplewise",), memory_budget={"fp32": "160MiB"}),
    ],
}


class CustomJoint(nn.Module):
    """The standard joint's computation in a plain module: the loss calls it and backpropagates its graph."""

    def __init__(self, hidden: int, vocab: int) -> None:
        super().__init__()
        self.hidden_dim = hidden
        self.encoder_proj = nn.Linear(hidden, hidden)
        self.predictor_proj = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, vocab)

    def forward(self, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder_proj(encoder_out).unsqueeze(2) + self.predictor_proj(predictor_out).unsqueeze(1)
        return self.output(torch.tanh(hidden))  # (N, T, U+1, V)


def make_inputs(cell: dict, device: torch.device, dtype: str):
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    B, T, U, V, H = (cell[k] for k in "BTUVH")
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
        joint = CustomJoint(H, V)
    else:  # "dropout": the standard joint in training mode with dropout 0.1 on its activations (run fused)
        joint = StandardJoint(H, H, H, V, dropout=0.1 if kind == "dropout" else 0.0)
    return encoder_out, predictor_out, joint.to(device), targets, logit_lengths.to(device), target_lengths.to(device)


def step(mode: str, inputs, dtype: str, memory_budget) -> None:
    """One forward + backward of joint + loss ("mean" reduction)."""
    encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths = inputs
    autocast = torch.autocast(encoder_out.device.type, dtype=torch.bfloat16) if dtype == "bf16-autocast" else contextlib.nullcontext()
    with autocast:
        if mode == "samplewise":
            loss = samplewise_transducer_loss(
                encoder_out, predictor_out, joint, targets, logit_lengths, target_lengths, memory_budget=memory_budget
            )
        elif mode == "batched":
            loss = transducer_loss(joint(encoder_out, predictor_out), targets, logit_lengths, target_lengths)
        else:
            import torchaudio

            logits = joint(encoder_out, predictor_out).float()  # torchaudio has no bfloat16 kernel
            loss = torchaudio.functional.rnnt_loss(
                logits, targets.int(), logit_lengths.int(), target_lengths.int(), blank=0, reduction="mean"
            )
    loss.backward()
    for tensor in (encoder_out, predictor_out, *joint.parameters()):
        tensor.grad = None


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_cpu_in_process(cell: dict, mode: str, dtype: str, repeats: int, memory_budget) -> dict:
    torch.set_num_threads(torch.get_num_threads())
    inputs = make_inputs(cell, torch.device("cpu"), dtype)
    step(mode, inputs, dtype, memory_budget)  # warm-up (and extension load)
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    baseline = _rss_kib("VmRSS")
    times, cpu_times = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        step(mode, inputs, dtype, memory_budget)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    peak = (_rss_kib("VmHWM") - baseline) * 1024
    # CPU time (all threads) is what a shared machine cannot inflate by making the process wait
    return dict(time_s=statistics.median(times), cpu_s=statistics.median(cpu_times), peak_bytes=peak)


def measure_cpu(cell: dict, mode: str, dtype: str, repeats: int, memory_budget) -> dict:
    """Run one (cell, mode) in a fresh interpreter so peak RSS is not polluted by earlier cells."""
    request = json.dumps(dict(cell=cell, mode=mode, dtype=dtype, repeats=repeats, memory_budget=memory_budget))
    process = subprocess.run([sys.executable, __file__, "--cell", request], capture_output=True, text=True)
    if process.returncode != 0:
        return dict(error=process.stderr.strip().splitlines()[-1] if process.stderr.strip() else f"exit {process.returncode}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def measure_cuda(cell: dict, mode: str, dtype: str, repeats: int, memory_budget) -> dict:
    device = torch.device("cuda")
    try:
        inputs = make_inputs(cell, device, dtype)
        step(mode, inputs, dtype, memory_budget)  # warm-up (and extension build/load)
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(mode, inputs, dtype, memory_budget)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        peak = torch.cuda.max_memory_allocated()
        return dict(time_s=statistics.median(times), peak_bytes=peak, transient_bytes=peak - baseline)
    except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
        return dict(error=str(error).splitlines()[0][:120])
    finally:
        inputs = None
        torch.cuda.empty_cache()


def count_ops(batch: int, memory_budget: str, joint: str) -> dict:
    """aten ops and host-sync calls of one sample-wise forward + backward (CPU, fp32)."""
    cell = dict(B=batch, T=50, U=10, V=64, H=64, joint=joint)
    inputs = make_inputs(cell, torch.device("cpu"), "fp32")
    step("samplewise", inputs, "fp32", memory_budget)  # extension load, first-call caches
    with SyncCounter() as counter:
        step("samplewise", inputs, "fp32", memory_budget)
    aten = counter.aten_ops
    return dict(cell, memory_budget=memory_budget, aten_ops=aten, aten_ops_per_sample=aten / batch,
                sync_ops=counter.sync_ops, syncs=counter.syncs)


def print_op_counts(joints: list[str]) -> None:
    """Ops per sample-wise step at B=16 and 64: about one sample per group (1 MiB) and T-chunked samples
    (256 KiB) for the custom joint at these sizes (the fused standard joint fits more per group)."""
    rows = [count_ops(batch, budget, joint) for joint in joints for budget in ("1MiB", "256KiB") for batch in (16, 64)]
    header = f"{'joint':<9} {'B':>4} {'budget':>7} {'aten ops':>9} {'per sample':>10} {'sync ops':>8}  sync calls"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['joint']:<9} {row['B']:>4} {row['memory_budget']:>7} {row['aten_ops']:>9} {row['aten_ops_per_sample']:>10.1f} "
            f"{row['sync_ops']:>8}  {row['syncs']}"
        )


def print_host_overhead(joints: list[str]) -> None:
    """Host (Python + dispatcher) time per sample of a sample-wise forward + backward, one sample per group, at
    lattice sizes (T=8, U=3, H=8, V=16) where the kernels cost almost nothing: the floor a GPU step cannot go
    below when its kernels are small (many T-chunks at a tight budget). Process CPU time, best of 5, 1 thread."""
    torch.set_num_threads(1)
    batch = 256
    print(f"{'joint':<9} {'budget':<17} {'host us per sample':>18}")
    for joint in joints:
        cell = dict(B=batch, T=8, U=3, V=16, H=8, joint=joint)
        encoder_out, predictor_out, module, targets, logit_lengths, target_lengths = make_inputs(cell, torch.device("cpu"), "fp32")
        logit_lengths.fill_(8)
        target_lengths.fill_(3)
        for budget, label in ((None, "whole sample"), ("2KiB", "2 KiB: T-chunks")):

            def run() -> None:
                loss = samplewise_transducer_loss(
                    encoder_out, predictor_out, module, targets, logit_lengths, target_lengths,
                    memory_budget=budget, max_samples_per_group=1,
                )
                loss.backward()

            run()
            times = []
            for _ in range(5):
                start = time.process_time()
                run()
                times.append(time.process_time() - start)
            print(f"{joint:<9} {label:<17} {min(times) / batch * 1e6:>18.0f}")


def print_plans() -> None:
    """Groups, steps and estimated peak of the sample-wise plan at B=1024, T=1000, U=200, H=512, V=1024 (the
    benchmark's lengths), per joint, dtype and budget; nothing is allocated."""
    from asr_plugin.losses._memory import cell_bytes, plan_groups

    B, T, U, V, H = 1024, 1000, 200, 1024, 512
    generator = torch.Generator().manual_seed(0)
    torch.randn(B, T, H, generator=generator), torch.randn(B, U + 1, H, generator=generator)  # same draws as make_inputs
    torch.randint(1, V, (B, U), generator=generator)
    frames = torch.randint(int(0.7 * T), T + 1, (B,), generator=generator)
    labels = torch.randint(int(0.7 * U), U + 1, (B,), generator=generator)
    frames[0], labels[0] = T, U
    frames, labels = tuple(frames.tolist()), tuple(labels.tolist())
    print(
        f"{'joint':<9} {'dtype':<6} {'budget':>7} {'cell B':>7} {'groups':>6} {'steps':>6} {'recomputed':>10} {'cells %':>7} "
        f"{'step MiB':>9} {'inputs+grads GiB':>16} {'est. peak GiB':>13}"
    )
    for joint, copies in (("standard", 2), ("custom", 4)):
        for dtype, size in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            fixed = 2 * B * (T + U + 1) * H * size.itemsize
            for budget in (160 * 2**20, 192 * 2**20, 512 * 2**20, 2**30):
                plan = plan_groups(frames, labels, budget, cell_bytes(V, size, H, size, copies))
                steps = sum(len(group.chunks()) for group in plan.groups)
                recomputed = steps - len(plan.groups)  # chunks other than each group's last (kept from pass 1)
                print(
                    f"{joint:<9} {dtype:<6} {budget // 2**20:>4}MiB {plan.bytes_per_cell:>7} {len(plan.groups):>6} {steps:>6} "
                    f"{recomputed:>10} {100 * plan.recomputed_fraction():>7.0f} {plan.step_bytes() / 2**20:>9.0f} "
                    f"{fixed / 2**30:>16.2f} {(fixed + plan.step_bytes()) / 2**30:>13.2f}"
                )


def print_table(rows: list[dict]) -> None:
    header = f"{'B':>5} {'T':>5} {'U':>4} {'V':>5} {'H':>4}  {'joint':<8} {'mode':<11} {'budget':>8} {'time (s)':>9} {'peak (MiB)':>11}  note"
    print(header)
    print("-" * len(header))
    for row in rows:
        if "error" in row:
            result = f"{'-':>9} {'-':>11}  {row['error']}"
        else:
            result = f"{row['time_s']:>9.3f} {row['peak_bytes'] / 2**20:>11.1f}"
            result += f"  cpu {row['cpu_s']:.3f} s" if "cpu_s" in row else ""
        budget = row.get("memory_budget") or "default"
        print(f"{row['B']:>5} {row['T']:>5} {row['U']:>4} {row['V']:>5} {row['H']:>4}  {row['joint']:<8} {row['mode']:<11} {budget:>8} {result}")


def plot(rows: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    ok = [row for row in rows if "error" not in row]
    labels = [f"{r['mode']}\nB{r['B']} T{r['T']} U{r['U']}" for r in ok]
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(max(8, len(ok) * 1.2), 4))
    time_axis.bar(labels, [r["time_s"] for r in ok])
    time_axis.set_ylabel("median time (s)")
    memory_axis.bar(labels, [r["peak_bytes"] / 2**20 for r in ok])
    memory_axis.set_ylabel("peak memory (MiB)")
    for axis in (time_axis, memory_axis):
        axis.tick_params(axis="x", labelrotation=90, labelsize=7)
    figure.tight_layout()
    figure.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--preset", choices=tuple(PRESETS), default="quick")
    parser.add_argument("--dtype", choices=("fp32", "bf16-autocast"), default="fp32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-budget", default=None, help="sample-wise budget, e.g. 512MiB (default: the cell's, else the loss's)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    parser.add_argument("--joints", default="standard", help="comma-separated subset of " + ",".join(JOINTS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--plan", action="store_true", help="print the paper-scale plans (no computation)")
    parser.add_argument("--count-ops", action="store_true", help="count aten ops and host syncs per sample-wise step (CPU)")
    parser.add_argument("--host-overhead", action="store_true", help="host time per sample-wise sample at tiny lattices (CPU)")
    parser.add_argument("--cell", help=argparse.SUPPRESS)  # internal: one CPU measurement in a subprocess
    args = parser.parse_args()
    if args.cell:
        request = json.loads(args.cell)
        print(json.dumps(measure_cpu_in_process(**request)))
        return
    joints = [joint for joint in args.joints.split(",") if joint in JOINTS]
    if args.count_ops:
        print_op_counts(joints)
        return
    if args.host_overhead:
        print_host_overhead(joints)
        return
    if args.plan:
        print_plans()
        return

    measure = measure_cuda if args.device == "cuda" else measure_cpu
    wanted = set(args.modes.split(","))
    rows = []
    for cell in PRESETS[args.preset]:
        if isinstance(cell.get("memory_budget"), dict) and args.dtype not in cell["memory_budget"]:
            continue
        for joint in joints:
            for mode in (m for m in cell["modes"] if m in wanted):
                shape = dict({k: cell[k] for k in "BTUVH"}, joint=joint)
                budget = args.memory_budget or cell.get("memory_budget")
                budget = budget.get(args.dtype) if isinstance(budget, dict) else budget
                result = measure(shape, mode, args.dtype, args.repeats, budget if mode == "samplewise" else None)
                rows.append(dict(shape, mode=mode, memory_budget=budget if mode == "samplewise" else None, **result))
                print(json.dumps(rows[-1]), flush=True)
    print_table(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    stem = args.out / f"loss_{args.device}_{args.preset}_{args.dtype}_{stamp}"
    meta = dict(device=args.device, preset=args.preset, dtype=args.dtype, threads=torch.get_num_threads(), torch=torch.__version__)
    stem.with_suffix(".json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=2))
    plot(rows, stem.with_suffix(".png"))
    print(f"results: {stem}.json")


if __name__ == "__main__":
    main()
