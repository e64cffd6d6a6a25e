"""Benchmark the transducer losses: forward + backward of joint + loss, peak memory and median time.

The cells, inputs, modes and measurements are ``benchmarks.loss`` (its docstring says what is
measured how); this is its command line.

    python scripts/benchmark_loss.py --device cpu --preset cpu-targets
    OMP_NUM_THREADS=1 python scripts/benchmark_loss.py --preset cpu-tdt        # TDT (D=5) vs RNN-T vs NeMo (NeMo venv)
    python scripts/benchmark_loss.py --device cuda --preset gpu-targets --dtype bf16-autocast
    python scripts/benchmark_loss.py --device cuda --preset paper --dtype fp32   # B=1024, T=1000, U=200
    python scripts/benchmark_loss.py --device cuda --preset benchmark-b30 --backends triton,cuda   # side by side
                                     # (with torchaudio and the flash joint: mode "flash", over Triton)
    python scripts/benchmark_loss.py --device cuda --preset paper-tdt --dtype bf16-autocast   # the same in TDT, D=5
    python scripts/benchmark_loss.py --count-ops     # dispatched ops and host syncs per sample-wise step
    python scripts/benchmark_loss.py --plan [--durations 5]   # the planner's figures for the paper-scale cell, no run
    python scripts/benchmark_loss.py --host-overhead --joints standard,custom   # host time per sample (CPU)
    OMP_NUM_THREADS=1 python scripts/benchmark_loss.py --loss-only --repeats 5   # the loss alone: TDT (D=5) vs RNN-T

``--count-ops`` runs one sample-wise forward + backward on the CPU at B=16 and B=64 under a
TorchDispatchMode and a TorchFunctionMode and counts the aten ops and the calls that block the host on
CUDA (scalar reads ``.item()``/``bool()``, ``nonzero``, device-to-host copies ``.cpu()``/``.tolist()``/
``.to("cpu")``, and ``torch.tensor``/``torch.as_tensor`` of Python data, a host-to-device copy). It
counts on the CPU what the GPU would dispatch, so it needs no GPU. ``--durations D`` runs those on the TDT
loss with durations 0..D-1 (the presets name their own D).

Results: a table on stdout, JSON (and a PNG when matplotlib is installed) under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch

from asr_plugin.files import write_text_atomic
from asr_plugin.losses.backends import BACKENDS, check_backend
from asr_plugin.user_errors import exit_on_user_error
from benchmarks.loss import (
    JOINTS,
    MODES,
    PRESETS,
    plot,
    print_host_overhead,
    print_loss_only,
    print_op_counts,
    print_plans,
    print_table,
    run_cells,
)

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--preset", choices=tuple(PRESETS), default="quick")
    parser.add_argument("--dtype", choices=("fp32", "bf16-autocast"), default="fp32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--memory-budget", default=None, help="sample-wise budget, e.g. 512MiB (default: the cell's, else the loss's)"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    parser.add_argument("--joints", default="standard", help="comma-separated subset of " + ",".join(JOINTS))
    parser.add_argument(
        "--backends", default="auto", help="comma-separated kernels of our modes: " + ",".join(BACKENDS)
    )
    parser.add_argument(
        "--durations", type=int, default=0, help="D for --count-ops/--host-overhead/--plan: TDT with durations 0..D-1"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--plan", action="store_true", help="print the paper-scale plans (no computation)")
    parser.add_argument(
        "--count-ops", action="store_true", help="count aten ops and host syncs per sample-wise step (CPU)"
    )
    parser.add_argument(
        "--host-overhead", action="store_true", help="host time per sample-wise sample at tiny lattices (CPU)"
    )
    parser.add_argument(
        "--loss-only",
        action="store_true",
        help="batched loss alone on given logits: RNN-T vs TDT (--durations, default 5)",
    )
    args = parser.parse_args()
    joints = [joint for joint in args.joints.split(",") if joint in JOINTS]
    if args.count_ops:
        print_op_counts(joints, args.durations)
        return
    if args.host_overhead:
        print_host_overhead(joints, args.durations)
        return
    if args.plan:
        print_plans(args.durations)
        return
    if args.loss_only:
        print_loss_only(args.repeats, args.durations or 5)
        return

    rows = []
    backends = tuple(check_backend(backend) for backend in args.backends.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    stem = args.out / f"loss_{args.device}_{args.preset}_{args.dtype}_{stamp}"
    meta = dict(
        device=args.device,
        preset=args.preset,
        dtype=args.dtype,
        threads=torch.get_num_threads(),
        torch=torch.__version__,
    )
    cells = run_cells(
        args.preset,
        args.device,
        args.dtype,
        args.repeats,
        set(args.modes.split(",")),
        joints,
        args.memory_budget,
        backends,
    )
    for row in cells:
        rows.append(row)
        print(json.dumps(row), flush=True)
        # after every row: a run cut by its time limit (the GPU check's stages) keeps the rows it finished
        write_text_atomic(stem.with_suffix(".json"), json.dumps(dict(meta=meta, rows=rows), indent=2))
    print_table(rows)
    write_text_atomic(stem.with_suffix(".json"), json.dumps(dict(meta=meta, rows=rows), indent=2))
    plot(rows, stem.with_suffix(".png"))
    print(f"results: {stem}.json")


if __name__ == "__main__":
    exit_on_user_error()(main)()
