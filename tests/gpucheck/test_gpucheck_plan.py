"""The GPU check's plan (gpucheck.plan) and the tables rendered from stage outputs."""

from __future__ import annotations

import json

import pytest

from gpucheck.__main__ import select
from gpucheck.plan import GPU_TOTAL_S, cpu_stages, gpu_stages
from gpucheck.tables import PAPER_TARGETS, benchmark_table, junit_table, profile_table

# the priority order of the GPU check (the Triton backend, no build: its CUDA tests and the bf16 paper cells; build;
# the side-by-side run; the CUDA C++ tests; paper bf16 and fp32 over CUDA C++; then, when time is left, TF32, TDT,
# the smoke and the profiles)
ORDER = [
    "triton-tests",
    "triton-paper-bf16",
    "build",
    "side-by-side",
    "cuda-tests",
    "paper-bf16",
    "paper-fp32",
    "paper-fp32-tf32",
    "paper-tdt",
    "train-smoke",
    "profile-bf16",
    "profile-fp32",
]
CORE = ORDER[: ORDER.index("paper-fp32") + 1]  # the stages whose limits fit the total together


def test_gpu_plan_fits_one_device_command_in_priority_order():
    stages = gpu_stages("python3")
    assert [s.name for s in stages] == ORDER
    assert sum(s.limit_s for s in stages if s.name in CORE) < GPU_TOTAL_S <= 9 * 60
    assert all(s.expected_s is not None and s.expected_s < s.limit_s for s in stages)
    by_name = {s.name: s for s in stages}
    assert not by_name["triton-tests"].needs and not by_name["triton-paper-bf16"].needs  # no extension build
    assert all(s.needs == ("build",) for s in stages[ORDER.index("side-by-side") :])
    assert by_name["paper-fp32-tf32"].command[1:4] == ["-m", "gpucheck.tf32", "scripts/benchmark_loss.py"]
    assert "--preset" in by_name["paper-bf16"].command and "paper" in by_name["paper-bf16"].command
    assert by_name["triton-paper-bf16"].command[-2:] == ["--backends", "triton"]
    assert "triton,cuda" in by_name["side-by-side"].command and "benchmark-b30" in by_name["side-by-side"].command
    assert by_name["profile-fp32"].command[-2:] == ["--memory-budget", "192MiB"]


def test_dry_run_has_the_same_stages_and_a_stage_that_must_be_cut():
    names = [s.name for s in cpu_stages("python3")]
    assert names == ORDER + ["limit-check"]
    assert cpu_stages("python3")[-1].expect == "timed_out"


def test_select_keeps_plan_order_and_drops_prerequisites_outside_the_selection():
    chosen = select(gpu_stages("python3"), "profile-fp32,train-smoke")
    assert [s.name for s in chosen] == ["train-smoke", "profile-fp32"] and all(not s.needs for s in chosen)
    with pytest.raises(ValueError, match="unknown stage"):
        select(gpu_stages("python3"), "paper")


def test_junit_table_counts_and_names_failures(tmp_path):
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite name="pytest" tests="4">'
        '<testcase classname="t.a" name="ok"/><testcase classname="t.a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="t.b" name="skip"><skipped message="no gpu"/></testcase>'
        '<testcase classname="t.b" name="err"><error message="y"/></testcase></testsuite></testsuites>'
    )
    table = junit_table(tmp_path)
    assert table.splitlines()[0] == "1 passed, 1 failure, 1 error, 1 skipped"
    assert "failure: t.a::bad" in table and "error: t.b::err" in table


def _row(**overrides):
    row = dict(
        B=1024,
        T=1000,
        U=200,
        V=1024,
        H=512,
        joint="standard",
        mode="samplewise",
        memory_budget="512MiB",
        time_s=2.5,
        peak_bytes=2900 * 2**20,
    )
    row.update(overrides)
    return row


def test_benchmark_table_judges_only_the_paper_cell(tmp_path):
    rows = [
        _row(),
        _row(time_s=4.8),
        _row(time_s=3.5, peak_bytes=3344 * 2**20, memory_budget=None),
        _row(B=32, time_s=99.0),
        _row(time_s=None, error="CUDA out of memory"),
    ]
    rows[-1].pop("time_s")
    (tmp_path / "loss_cuda_paper_bf16-autocast_1.json").write_text(
        json.dumps(dict(meta=dict(dtype="bf16-autocast"), rows=rows))
    )
    lines = benchmark_table()(tmp_path).splitlines()
    assert "target <= 3 s, <= 3072 MiB" in lines[0]
    assert lines[1].endswith(" met") and lines[2].endswith("missed (time)")
    assert lines[3].endswith("missed (time and memory)") and " default " in lines[3]
    assert lines[4].split()[-2:] == ["99.000", "2900"]  # another cell: reported, not judged
    assert lines[5].endswith("CUDA out of memory")
    untargeted = benchmark_table(target_dtype=False)(tmp_path).splitlines()
    assert "note" in untargeted[0] and not untargeted[1].endswith("met")
    assert PAPER_TARGETS["fp32"].seconds == 15 and PAPER_TARGETS["fp32"].mib == 5120


def test_profile_table_reads_the_summary(tmp_path):
    summary = dict(
        meta=dict(cell=dict(B=128, T=1000, U=200, V=1024, H=512), dtype="fp32", memory_budget="192MiB"),
        plan=dict(steps=820, estimated_peak_mib=600.0),
        unprofiled_s=2.25,
        steps=[
            dict(
                wall_s=2.5,
                busy_us=2.0e6,
                memory=dict(peak_bytes=700 * 2**20),
                categories={
                    "GEMM": dict(us=1.5e6, calls=10),
                    "other": dict(us=1e5, calls=3),
                    "transducer_alphas_betas": dict(us=3e5, calls=2),
                    "reduction": dict(us=0.0, calls=0),
                },
            )
        ],
    )
    (tmp_path / "profile_cuda_fp32_x.json").write_text(json.dumps(summary))
    line = profile_table(tmp_path).splitlines()[1]
    assert line.split()[:6] == ["B=128", "T=1000", "U=200", "fp32", "192MiB", "2.250"]
    assert " 80.0 " in line and " 820 " in line and " 700 " in line and " 600 " in line
    assert line.endswith("GEMM 1500, transducer_alphas_betas 300, other 100")
