"""Profile one sample-wise transducer loss cell: where the device time, the host time and the memory go
(``scripts/profile_loss.py`` is the command line).

One forward + backward of joint + ``TransducerLoss("samplewise")`` (``benchmarks.loss.step``, inputs from
``benchmarks.loss.make_inputs``; RNN-T or TDT): one warm-up step, one unprofiled step (its wall time shows the profiler's
own overhead), then ``--steps`` steps, each under its own ``torch.profiler`` session. Per profiled step:

1. device time by category (table: ms, %, calls) and the 10 largest kernels (CPU: aten ops);
2. wall time, device-busy time (union of kernel intervals on CUDA; on the CPU the union of aten/asr_plugin
   op intervals), the idle fraction 1 - busy/wall (high: host-bound), the host time spent inside torch
   ops, and the wall time per plan step (group or T-chunk); the plan (groups, steps, estimated peak) is the
   loss's ``last_plan``, and each lattice op's call count is checked against it;
3. CUDA only: peak ``max_memory_allocated`` against the planner's estimate, then one more step under
   ``torch.cuda.memory._record_memory_history`` whose trace is replayed to list the allocations live at
   the moment of peak allocation, with the Python line that allocated them.

Results: tables on stdout, a JSON summary (and on CUDA a gzipped chrome trace of the first profiled step,
for chrome://tracing or Perfetto) under ``--out``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import asr_plugin
from asr_plugin.files import write_atomic
from asr_plugin.losses import Plan, TransducerLoss

from .loss import Inputs, step

REPO_ROOT = Path(asr_plugin.__file__).resolve().parent.parent
MiB = 2**20
# The three ops of every lattice (asr_plugin.losses.lattices), RNN-T ("transducer_*") and TDT ("tdt_*") alike.
LATTICE_OPS = ("log_probs", "alphas_betas", "logits_grad")
_OP_FAMILIES = ("transducer", "tdt")
CATEGORIES = (*LATTICE_OPS, "GEMM", "elementwise", "reduction", "indexing/cat", "memset/memcpy", "other")

# Categories by name, first match wins. CUDA: lower-cased substrings of the demangled kernel name. The
# asr_plugin kernels come first (our own names, unambiguous; "log_probs_kernel" also matches TDT's
# "tdt_log_probs_kernel"); GEMM before reductions because cuBLAS's
# split-K epilogue is "splitKreduce_kernel" (cuBLAS: *gemm*/cublas*/xmma/splitKreduce, CUTLASS: cutlass*,
# Hopper cuBLASLt: nvjet_*); "Memcpy ..."/"Memset ..." are the copy-engine records, not kernels; index_select
# / index_add_ (indexSelect*/indexFunc*) and torch.cat (CatArrayBatchedCopy) are data movement of the group
# gather/scatter; at::native::reduce_kernel covers sum/amax/any; the rest of at::native's TensorIterator
# kernels (vectorized_/unrolled_/elementwise_kernel, fills and copies included) are elementwise.
CUDA_RULES = (
    ("log_probs", ("log_probs_kernel",)),
    ("alphas_betas", ("alphas_betas_kernel",)),
    ("logits_grad", ("logits_grad_kernel",)),
    ("GEMM", ("gemm", "cublas", "cutlass", "nvjet", "xmma", "splitkreduce")),
    ("memset/memcpy", ("memcpy", "memset")),
    ("indexing/cat", ("index", "catarray", "gather", "scatter")),
    ("reduction", ("reduce", "softmax")),
    ("elementwise", ("elementwise",)),
)
# CPU: op names without the "aten::" prefix and a trailing "_" (in-place variants), matched exactly; the
# asr_plugin ops by their "asr_plugin::<family>_<op>" names. Ops not listed (views, empty, to, autograd wrappers)
# are "other"; a listed op's children (e.g. the empty/fill inside an asr_plugin op or the bias copy inside
# addmm) are charged to its outermost listed ancestor, so the table's calls count top-level ops only.
CPU_RULES = (
    ("GEMM", {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "_addmm_activation"}),
    ("memset/memcpy", {"copy", "fill", "zero", "zeros", "zeros_like", "ones", "ones_like", "clone"}),
    (
        "indexing/cat",
        {"index_select", "index_add", "index_copy", "index", "index_put", "cat", "stack", "gather", "scatter"},
    ),
    (
        "reduction",
        {
            "sum",
            "mean",
            "amax",
            "amin",
            "max",
            "min",
            "any",
            "all",
            "logsumexp",
            "_log_softmax",
            "_softmax",
            "norm",
            "prod",
        },
    ),
    (
        "elementwise",
        {
            "add",
            "sub",
            "mul",
            "div",
            "neg",
            "tanh",
            "tanh_backward",
            "gelu",
            "gelu_backward",
            "relu",
            "threshold_backward",
            "sigmoid",
            "exp",
            "log",
            "pow",
            "sqrt",
            "rsqrt",
            "abs",
            "clamp",
            "where",
            "isfinite",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "bitwise_and",
            "bitwise_or",
            "bitwise_not",
            "logical_not",
            "arange",
            "masked_fill",
        },
    ),
)
_OP_PREFIXES = ("aten::", "asr_plugin::")  # CPU events that are dispatched ops (not Python/autograd ranges)
_RUNTIME = re.compile(r"^cu(da)?[A-Z]")  # CUDA runtime (cudaX) and driver (cuX) API calls
# allocator counters compared before/after a step: retries (cache flushed after a failed cudaMalloc) and
# cudaMalloc/cudaFree of segments are the allocator effects that cost time
_ALLOCATOR_COUNTERS = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms")


def cuda_category(name: str) -> str:
    lower = name.lower()
    for category, needles in CUDA_RULES:
        if any(needle in lower for needle in needles):
            return category
    return "other"


def _lattice_op(name: str) -> str | None:
    """ "log_probs" for "asr_plugin::transducer_log_probs" or "asr_plugin::tdt_log_probs"; None for other names."""
    family, _, op = name.removeprefix("asr_plugin::").partition("_")
    return op if name.startswith("asr_plugin::") and family in _OP_FAMILIES and op in LATTICE_OPS else None


def cpu_category(name: str) -> str | None:
    """Category of a dispatched op, None for ops the table does not list (charged to a listed ancestor)."""
    if name.startswith("asr_plugin::"):
        return _lattice_op(name)
    base = name.removeprefix("aten::").rstrip("_") if name.startswith("aten::") else None
    for category, names in CPU_RULES:
        if base in names:
            return category
    return None


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (microseconds)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def summarise_events(events, device: str) -> dict:
    """Category table, top kernels/ops, device-busy and host-in-ops time (us) of one profiled step."""
    table = {category: dict(us=0.0, calls=0) for category in CATEGORIES}
    by_name: dict[str, dict] = {}
    host_ops = [
        e for e in events if e.device_type == DeviceType.CPU and not e.is_async and e.name.startswith(_OP_PREFIXES)
    ]
    host_intervals = [(e.time_range.start, e.time_range.end) for e in host_ops]

    def add(name: str, category: str, us: float, call: bool) -> None:
        table[category]["us"] += us
        table[category]["calls"] += call
        entry = by_name.setdefault(name, dict(us=0.0, calls=0, category=category))
        entry["us"] += us
        entry["calls"] += call

    if device == "cuda":
        # kernels, memcpy and memset records (user annotations mirrored on the GPU timeline are ranges, not work)
        kernels = [e for e in events if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
        for kernel in kernels:
            add(kernel.name, cuda_category(kernel.name), kernel.time_range.end - kernel.time_range.start, True)
        busy = union_us([(k.time_range.start, k.time_range.end) for k in kernels])
    else:
        for op in host_ops:
            owner, parent = op, op.cpu_parent
            while parent is not None:  # outermost listed ancestor
                if cpu_category(parent.name) is not None:
                    owner = parent
                parent = parent.cpu_parent
            category = cpu_category(owner.name) or "other"
            add(owner.name, category, op.self_cpu_time_total, owner is op)
        busy = union_us(host_intervals)
    host_ops_calls = {op: sum(_lattice_op(e.name) == op for e in host_ops) for op in LATTICE_OPS}
    top = sorted(by_name.items(), key=lambda item: -item[1]["us"])[:10]
    # CUDA runtime/driver calls on the host (cudaLaunchKernel, cudaMalloc/cudaFree: allocator cache misses,
    # cudaStreamSynchronize/cudaMemcpyAsync: host waits); none on the CPU
    runtime: dict[str, dict] = {}
    for event in events:
        if event.device_type == DeviceType.CPU and _RUNTIME.match(event.name):
            entry = runtime.setdefault(event.name, dict(us=0.0, calls=0))
            entry["us"] += event.time_range.end - event.time_range.start
            entry["calls"] += 1
    return dict(
        categories=table,
        top=[dict(name=name, **entry) for name, entry in top],
        busy_us=busy,
        host_in_ops_us=union_us(host_intervals),
        device_events=sum(entry["calls"] for entry in table.values()),
        asr_op_calls=host_ops_calls,
        runtime=dict(sorted(runtime.items(), key=lambda item: -item[1]["us"])),
    )


def expected_calls(plan: Plan) -> dict:
    """Lattice op calls of one gradient step ("mean" reduction): log-probs for every T-chunk (pass 1), the
    recursions once per group, the logits gradient for every T-chunk (pass 2)."""
    return {"log_probs": plan.steps, "alphas_betas": len(plan.groups), "logits_grad": plan.steps}


def plan_summary(plan: Plan) -> dict:
    """The plan's figures for the JSON summary."""
    return dict(
        samples=len(plan.order),
        groups=len(plan.groups),
        steps=plan.steps,
        recomputed_fraction=plan.recomputed_fraction(),
        largest_step_mib=plan.step_bytes() / MiB,
        estimated_peak_mib=plan.estimated_peak_bytes() / MiB,
        fixed_mib=plan.fixed_bytes / MiB,
        description=plan.describe(),
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed_step(loss: TransducerLoss, inputs: Inputs, dtype: str) -> float:
    device = inputs.encoder_out.device
    sync(device)
    start = time.perf_counter()
    step(loss, inputs, dtype)
    sync(device)
    return time.perf_counter() - start


def profile_step(loss: TransducerLoss, inputs: Inputs, dtype: str, trace: Path | None) -> dict:
    device = inputs.encoder_out.device
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    memory = {}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        memory["before_bytes"] = torch.cuda.memory_allocated()
        counters = torch.cuda.memory_stats()
    with profile(activities=activities, acc_events=True) as profiler:  # one cycle; acc_events only silences a warning
        wall = timed_step(loss, inputs, dtype)
    if device.type == "cuda":
        memory["peak_bytes"] = torch.cuda.max_memory_allocated()
        memory["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        after = torch.cuda.memory_stats()
        memory["allocator"] = {key: after.get(key, 0) - counters.get(key, 0) for key in _ALLOCATOR_COUNTERS}
    started = time.perf_counter()
    summary = summarise_events(profiler.events(), device.type)
    summary.update(wall_s=wall, memory=memory, analysis_s=time.perf_counter() - started)
    if trace is not None:
        write_atomic(trace, lambda path: profiler.export_chrome_trace(str(path)))
    return summary


def print_step(index: int, summary: dict, plan: Plan, device: str) -> None:
    wall_ms, busy_ms = summary["wall_s"] * 1e3, summary["busy_us"] / 1e3
    total = sum(entry["us"] for entry in summary["categories"].values()) or 1.0
    unit = "kernel" if device == "cuda" else "op"
    print(f"\n--- profiled step {index}: {'device' if device == 'cuda' else 'CPU op'} time by category")
    print(f"{'category':<24} {'total ms':>10} {'%':>6} {'calls':>8}")
    for category, entry in summary["categories"].items():
        print(f"{category:<24} {entry['us'] / 1e3:>10.2f} {100 * entry['us'] / total:>6.1f} {entry['calls']:>8}")
    print(f"{'sum':<24} {total / 1e3:>10.2f} {100.0:>6.1f} {summary['device_events']:>8}")
    print(f"\n10 largest {unit}s by total time")
    print(f"{'total ms':>10} {'calls':>7} {'category':<24} name")
    for entry in summary["top"]:
        name = re.sub(r"^void ", "", entry["name"])
        print(f"{entry['us'] / 1e3:>10.2f} {entry['calls']:>7} {entry['category']:<24} {name[:110]}")
    steps = plan.steps
    host_ms = summary["host_in_ops_us"] / 1e3
    print(
        f"\nwall {wall_ms:.1f} ms, {'device busy (union of kernels)' if device == 'cuda' else 'busy in ops (union)'} "
        f"{busy_ms:.1f} ms, idle fraction {1 - busy_ms / wall_ms:.3f}"
    )
    if device == "cuda":
        print(
            f"host inside torch ops {host_ms:.1f} ms ({100 * host_ms / wall_ms:.0f} % of wall), outside (Python, autograd "
            f"engine, profiler) {wall_ms - host_ms:.1f} ms"
        )
    print(
        f"plan: {len(plan.groups)} groups, {steps} steps (T-chunks); wall per step {wall_ms / steps:.3f} ms, idle per step "
        f"{(wall_ms - busy_ms) / steps:.3f} ms, {summary['device_events'] / steps:.1f} {unit}s per step, "
        f"mean {unit} {summary['busy_us'] / max(1, summary['device_events']):.1f} us; event analysis took {summary['analysis_s']:.1f} s"
    )
    counted = summary["asr_op_calls"]
    checks = ", ".join(f"{op} {counted[op]}/{want}" for op, want in expected_calls(plan).items())
    print(
        f"lattice op calls (counted/expected from the plan): {checks}"
        f"{'' if all(counted[op] == want for op, want in expected_calls(plan).items()) else '  MISMATCH'}"
    )
    if summary["runtime"]:
        calls = ", ".join(
            f"{name} {entry['calls']}x {entry['us'] / 1e3:.1f} ms"
            for name, entry in list(summary["runtime"].items())[:6]
        )
        print(f"CUDA runtime on the host: {calls}")
    memory = summary["memory"]
    if memory:
        peak = memory["peak_bytes"] / MiB
        print(
            f"memory: peak allocated {peak:.1f} MiB (allocated before the step: {memory['before_bytes'] / MiB:.1f} MiB), "
            f"peak reserved {memory['peak_reserved_bytes'] / MiB:.1f} MiB; allocator during the step: "
            + ", ".join(f"{key} {value}" for key, value in memory["allocator"].items())
        )
        estimate = plan.estimated_peak_bytes() / MiB
        print(
            f"planner: inputs + their gradients + parameter-gradient buffers {plan.fixed_bytes / MiB:.1f} MiB + largest "
            f"step {plan.step_bytes() / MiB:.1f} MiB = estimated peak {estimate:.1f} MiB; peak - estimate = "
            f"{peak - estimate:.1f} MiB"
        )


# --- CUDA memory: which allocations are live at the peak -------------------------------------------------------


def short_frame(frames: list[dict]) -> str:
    """The innermost frame in this repository (else the innermost at all): 'path:line function'."""
    if not frames:
        return "<no Python frame (C++ / autograd engine thread)>"
    root = str(REPO_ROOT) + "/"
    ours = [f for f in frames if f.get("filename", "").startswith(root) and "/.venv/" not in f["filename"]]
    frame = (ours or frames)[0]
    return f"{frame['filename'].removeprefix(root)}:{frame['line']} {frame['name']}"


def live_at_peak(trace: list[dict], before_bytes: int) -> dict:
    """Replay an allocator trace (``_snapshot()['device_traces'][i]``) from `before_bytes` allocated: the
    peak allocated bytes, the trace index of the peak, and the allocations made during the trace that are
    live at the peak (list of trace entries). A block counts as freed at 'free_requested' (when the caller
    frees it; the allocator's allocated-bytes statistic drops then), or at 'free_completed' for traces
    without 'free_requested' entries."""
    free_action = "free_requested" if any(e["action"] == "free_requested" for e in trace) else "free_completed"

    def replay(stop: int | None):
        live, current, peak, peak_index = {}, before_bytes, before_bytes, -1
        for index, entry in enumerate(trace[:stop]):
            if entry["action"] == "alloc":
                live[entry["addr"]] = entry
                current += entry["size"]
                if current > peak:
                    peak, peak_index = current, index
            elif entry["action"] == free_action:
                live.pop(entry["addr"], None)
                current -= entry["size"]  # also for blocks allocated before the recording started
        return live, peak, peak_index

    _, peak, peak_index = replay(None)
    live, _, _ = replay(peak_index + 1)
    return dict(peak_bytes=peak, peak_index=peak_index, live=sorted(live.values(), key=lambda e: -e["size"]))


def memory_history_step(loss: TransducerLoss, inputs: Inputs, dtype: str, max_entries: int) -> dict | None:
    """One more step with the allocator's history recorded; prints and returns the allocations at the peak."""
    print("\n--- memory: allocations live at the peak (one more step, allocator history recorded)")
    try:
        torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="python", clear_history=True)
    except (RuntimeError, AttributeError, TypeError) as error:
        print(f"memory history unavailable ({type(error).__name__}: {error}); skipped")
        return None
    try:
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step(loss, inputs, dtype)
        torch.cuda.synchronize()
        measured_peak = torch.cuda.max_memory_allocated()
        snapshot = torch.cuda.memory._snapshot()
    except (RuntimeError, AttributeError) as error:
        print(f"memory history step failed ({type(error).__name__}: {error}); skipped")
        return None
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    traces = snapshot.get("device_traces") or []
    trace = traces[torch.cuda.current_device()] if len(traces) > torch.cuda.current_device() else []
    if not trace:
        print("the snapshot holds no allocator trace; skipped")
        return None
    if len(trace) >= max_entries:
        print(
            f"warning: the trace hit --history-entries={max_entries}; older entries were dropped, the replay is partial"
        )
    result = live_at_peak(trace, before)
    live = result["live"]
    by_line: dict[str, list[int]] = {}
    for entry in live:
        by_line.setdefault(short_frame(entry.get("frames", [])), []).append(entry["size"])
    print(
        f"allocated before the step {before / MiB:.1f} MiB; peak replayed from the trace {result['peak_bytes'] / MiB:.1f} MiB "
        f"(max_memory_allocated {measured_peak / MiB:.1f} MiB) at trace entry {result['peak_index']} of {len(trace)}; "
        f"{len(live)} allocations of this step live then, {sum(e['size'] for e in live) / MiB:.1f} MiB"
    )
    print(f"{'MiB':>9}  largest allocations live at the peak: allocating line (innermost frame in this repository)")
    for entry in live[:10]:
        print(f"{entry['size'] / MiB:>9.1f}  {short_frame(entry.get('frames', []))}")
    print(f"{'MiB':>9} {'count':>6}  live at the peak, by allocating line")
    rows = sorted(by_line.items(), key=lambda item: -sum(item[1]))
    for line, sizes in rows[:15]:
        print(f"{sum(sizes) / MiB:>9.1f} {len(sizes):>6}  {line}")
    return dict(
        before_bytes=before,
        peak_bytes=result["peak_bytes"],
        max_memory_allocated=measured_peak,
        trace_entries=len(trace),
        live_by_line=[dict(line=line, bytes=sum(sizes), count=len(sizes)) for line, sizes in rows[:30]],
    )
