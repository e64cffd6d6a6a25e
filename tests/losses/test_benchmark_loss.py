"""scripts/benchmark_loss.py (over benchmarks.loss), which `scripts/gpu_check.sh` runs on the GPU: its
CPU path end to end on the tiny preset (so the script cannot rot between GPU sessions), and issue 9's CPU targets,
counted with its `--count-ops` machinery: host-sync calls per sample-wise step constant in B and at most 10, and
aten ops per sample with the fused standard joint at most half of what the engine dispatched before issue 9."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import loss as benchmark_loss

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

# aten ops per sample at commit 37e5e5e, before the engine's rewrite, per (B, budget)
# (docs/loss.md, "Sample-wise engine before/after its rewrite")
OPS_PER_SAMPLE_BEFORE = {(16, "1MiB"): 77.2, (64, "1MiB"): 72.5, (16, "256KiB"): 256.9, (64, "256KiB"): 238.2}


@pytest.mark.parametrize("joint", ["standard", "dropout", "custom"])
@pytest.mark.parametrize("budget", ["1MiB", "256KiB"])
@pytest.mark.parametrize("num_durations", [0, 5], ids=["rnnt", "tdt"])
def test_host_syncs_per_step_are_constant_in_the_batch(joint, budget, num_durations):
    small, large = (benchmark_loss.count_ops(batch, budget, joint, num_durations) for batch in (16, 64))
    assert small["syncs"] == large["syncs"], (small["syncs"], large["syncs"])
    assert large["sync_ops"] <= 10, large["syncs"]


@pytest.mark.parametrize("budget", ["1MiB", "256KiB"])
def test_fused_joint_halves_the_ops_per_sample(budget):
    for batch in (16, 64):
        counted = benchmark_loss.count_ops(batch, budget, "standard")
        assert counted["aten_ops_per_sample"] <= 0.5 * OPS_PER_SAMPLE_BEFORE[batch, budget], counted


@pytest.mark.parametrize(
    "mode, num_durations",
    [("torchaudio", 0), ("batched", 0), ("samplewise", 0), ("batched", 5), ("samplewise", 5)],
)
@pytest.mark.parametrize("joint", benchmark_loss.JOINTS)
def test_every_mode_and_joint_measures_on_the_cpu(mode, num_durations, joint):
    (cell,) = benchmark_loss.PRESETS["quick"]
    shape = dict({k: cell[k] for k in "BTUVH"}, D=num_durations, joint=joint)
    result = benchmark_loss.measure_cpu_in_process(shape, mode, "fp32", repeats=1, memory_budget=None)
    # the peak is RSS above a baseline; inside pytest's process it may even be negative (freed pages)
    assert result["time_s"] > 0 and isinstance(result["peak_bytes"], int), result
    if mode == "samplewise":  # the loss's own plan, not a log line
        assert result["groups"] >= 1 and result["steps"] >= result["groups"], result


def test_flash_mode_is_the_flash_joint_over_triton_and_samplewise_is_unfused(monkeypatch):
    """The side-by-side run measures the flash joint beside the unfused sample-wise loss of each backend, so
    "samplewise" must never turn into the flash joint (``flash_joint="auto"`` would on CUDA over Triton)."""
    flash = benchmark_loss.make_loss("flash", None)
    assert (flash.mode, flash.flash_joint, flash.backend) == ("samplewise", "always", "triton")
    assert benchmark_loss.make_loss("samplewise", None, backend="triton").flash_joint == "never"
    (cell,) = benchmark_loss.PRESETS["benchmark-b30"]
    assert cell["modes"][-1] == "flash"  # last: a slow first GPU run cuts only its own row
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert benchmark_loss.flash_runs(cell, "standard", "cuda")
    assert not benchmark_loss.flash_runs(cell, "standard", "cpu")  # the CPU needs the interpreter
    assert not benchmark_loss.flash_runs(cell, "dropout", "cuda") and not benchmark_loss.flash_runs(
        cell, "custom", "cuda"
    )
    assert not benchmark_loss.flash_runs(dict(cell, D=5), "standard", "cuda")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert benchmark_loss.flash_runs(cell, "standard", "cpu")
    measured = []
    monkeypatch.setattr(
        benchmark_loss, "measure_cuda", lambda shape, mode, *args: measured.append((mode, shape["backend"])) or {}
    )
    rows = list(
        benchmark_loss.run_cells(
            "benchmark-b30", "cuda", "fp32", 1, set(benchmark_loss.MODES), ["standard"], None, ("triton", "cuda")
        )
    )
    assert measured == [
        ("torchaudio", None),
        ("batched", "triton"),
        ("batched", "cuda"),
        ("samplewise", "triton"),
        ("samplewise", "cuda"),
        ("flash", "triton"),
    ]
    assert rows[-1]["mode"] == "flash" and rows[-1]["memory_budget"] is None


def test_modes_refuse_the_lattice_they_do_not_have():
    with pytest.raises(ValueError, match="torchaudio has no TDT loss"):
        benchmark_loss.make_loss("torchaudio", (0, 1, 2, 3, 4))
    with pytest.raises(ValueError, match="the nemo mode runs TDT cells"):
        benchmark_loss.make_loss("nemo", None)


def test_cli_writes_the_table_and_json(tmp_path):
    """The command line as gpu_check.sh uses it, on the CPU: one (mode, joint) in its subprocess."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [
        sys.executable,
        str(SCRIPTS / "benchmark_loss.py"),
        "--device",
        "cpu",
        "--preset",
        "quick",
        "--repeats",
        "1",
        "--modes",
        "samplewise",
        "--joints",
        "dropout",
        "--memory-budget",
        "64KiB",
        "--out",
        str(tmp_path),
    ]
    process = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert process.returncode == 0, process.stderr
    (path,) = tmp_path.glob("loss_cpu_quick_fp32_*.json")
    (row,) = json.loads(path.read_text())["rows"]
    assert (row["mode"], row["joint"], row["memory_budget"]) == ("samplewise", "dropout", "64KiB")
    assert "error" not in row and row["time_s"] > 0 and math.isfinite(row["peak_bytes"]), row
    assert " dropout  samplewise  auto       64KiB " in process.stdout, process.stdout


def test_loss_only_compares_the_lattices(capsys):
    benchmark_loss.print_loss_only(repeats=1)
    out = capsys.readouterr().out
    assert "rnnt " in out and "tdt D=5 " in out and "TDT / RNN-T: " in out, out
