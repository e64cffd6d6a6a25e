"""Profile one sample-wise transducer loss cell: where the device time, the host time and the memory go.

What is measured how: ``benchmarks.loss_profile``; this is its command line.

    python scripts/profile_loss.py --device cuda --dtype fp32 --memory-budget 192MiB     # B=128 paper cell
    python scripts/profile_loss.py --device cuda --dtype bf16-autocast --durations 5     # the same cell in TDT
    OMP_NUM_THREADS=1 python scripts/profile_loss.py --device cpu --B 4 --T 200 --U 50 --V 256 --H 256 --memory-budget 8MiB

Results: tables on stdout, a JSON summary (and on CUDA a gzipped chrome trace of the first profiled step,
for chrome://tracing or Perfetto) under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch

from asr_plugin.files import write_text_atomic
from asr_plugin.losses.planning import parse_memory_budget
from asr_plugin.user_errors import exit_on_user_error
from benchmarks.loss import make_inputs, make_loss
from benchmarks.loss_profile import (
    expected_calls,
    memory_history_step,
    plan_summary,
    print_step,
    profile_step,
    timed_step,
)

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--dtype", choices=("fp32", "bf16-autocast"), default="fp32")
    for name, default in (("B", 128), ("T", 1000), ("U", 200), ("V", 1024), ("H", 512)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument(
        "--memory-budget", default=None, help="e.g. 192MiB (default: the loss's, 1 GiB on CUDA, 256 MiB on CPU)"
    )
    parser.add_argument("--joint", choices=("standard", "custom"), default="standard")
    parser.add_argument(
        "--durations", type=int, default=0, help="D > 0: the TDT loss with durations 0..D-1 (the joint emits V + D)"
    )
    parser.add_argument("--steps", type=int, default=1, help="profiled steps after the warm-up and the unprofiled step")
    parser.add_argument("--history-entries", type=int, default=2_000_000, help="CUDA allocator trace entries kept")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    try:
        parse_memory_budget(args.memory_budget, "--memory-budget")
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    if args.durations < 0:
        parser.error(f"--durations must be >= 0, got {args.durations}")
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device visible")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device)
    cell = dict(B=args.B, T=args.T, U=args.U, V=args.V, H=args.H, D=args.durations, joint=args.joint)
    print(
        f"cell {cell}, {args.dtype}, memory budget {args.memory_budget or 'default'}, {args.device}"
        f"{' ' + torch.cuda.get_device_name() if device.type == 'cuda' else ''}, torch {torch.__version__}"
    )
    inputs = make_inputs(cell, device, args.dtype)
    loss = make_loss("samplewise", inputs.lattice, args.memory_budget)
    warm_up = timed_step(loss, inputs, args.dtype)  # extension load, allocator and cuBLAS warm-up
    unprofiled = timed_step(loss, inputs, args.dtype)
    print(f"warm-up step {warm_up * 1e3:.1f} ms, unprofiled step {unprofiled * 1e3:.1f} ms")
    print(loss.last_plan.describe())
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    budget = (args.memory_budget or "default").replace(" ", "")
    lattice = f"_D{args.durations}" if args.durations else ""
    stem = (
        args.out
        / f"profile_{args.device}_{args.dtype}_B{args.B}_T{args.T}_U{args.U}_V{args.V}_H{args.H}{lattice}_{args.joint}_{budget}_{stamp}"
    )
    trace = stem.with_name(stem.name + ".trace.json.gz") if device.type == "cuda" else None
    steps = []
    for index in range(args.steps):
        steps.append(profile_step(loss, inputs, args.dtype, trace if index == 0 else None))
        print_step(index, steps[-1], loss.last_plan, args.device)
    plan = loss.last_plan
    history = memory_history_step(loss, inputs, args.dtype, args.history_entries) if device.type == "cuda" else None
    summary = dict(
        meta=dict(
            cell=cell,
            dtype=args.dtype,
            memory_budget=args.memory_budget,
            device=args.device,
            torch=torch.__version__,
            gpu=torch.cuda.get_device_name() if device.type == "cuda" else None,
            threads=torch.get_num_threads(),
            date=stamp,
        ),
        plan=plan_summary(plan),
        expected_calls=expected_calls(plan),
        warm_up_s=warm_up,
        unprofiled_s=unprofiled,
        steps=steps,
        memory_history=history,
    )
    path = write_text_atomic(stem.with_name(stem.name + ".json"), json.dumps(summary, indent=2))
    print(f"\nresults: {path}" + (f", trace {trace}" if trace else ""))
    return summary


if __name__ == "__main__":
    exit_on_user_error()(main)()
