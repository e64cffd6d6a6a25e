"""scripts/profile_loss.py (over benchmarks.loss_profile): the CLI on a tiny CPU cell (RNN-T and TDT),
and the pieces only a GPU run exercises (kernel-name categories, the allocator-trace replay) on hand-made inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr_plugin.losses import Group, Plan
from asr_plugin.losses.planning import CellBytes
from benchmarks import loss_profile as profile_loss

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module", params=[0, 5], ids=["rnnt", "tdt"])
def cpu_run(request, tmp_path_factory) -> tuple[str, dict]:
    """stdout and JSON summary of one profiled step of a tiny cell whose 64 KiB budget forces T-chunks, with the
    RNN-T loss or the TDT loss (D = 5)."""
    out = tmp_path_factory.mktemp("profile")
    cell = [
        "--B",
        "4",
        "--T",
        "40",
        "--U",
        "8",
        "--V",
        "32",
        "--H",
        "16",
        "--memory-budget",
        "64KiB",
        "--durations",
        str(request.param),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.run(
        [sys.executable, str(SCRIPTS / "profile_loss.py"), "--device", "cpu", *cell, "--steps", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr
    lattice = f"_D{request.param}" if request.param else ""
    (path,) = out.glob(f"profile_cpu_fp32_B4_T40_U8_V32_H16{lattice}_standard_64KiB_*.json")
    return process.stdout, json.loads(path.read_text())


def test_cpu_table_has_every_category(cpu_run):
    stdout, summary = cpu_run
    table = stdout.split("--- profiled step 0")[1].split("10 largest")[0]
    for category in profile_loss.CATEGORIES:
        assert f"\n{category} " in table
    assert len(summary["steps"]) == 2
    assert sum(entry["us"] for entry in summary["steps"][0]["categories"].values()) > 0
    assert summary["steps"][0]["categories"]["GEMM"]["calls"] > 0


def test_cpu_op_counts_match_the_plan(cpu_run):
    stdout, summary = cpu_run
    plan = summary["plan"]
    assert (plan["samples"], plan["groups"]) == (4, 4)
    assert plan["steps"] > plan["groups"]  # the budget split samples into T-chunks
    for step in summary["steps"]:
        calls = {op: step["categories"][op]["calls"] for op in profile_loss.LATTICE_OPS}
        # pass 1: log-probs per T-chunk; recursions once per group; pass 2: the logits gradient per T-chunk
        assert calls == {
            "log_probs": plan["steps"],
            "alphas_betas": plan["groups"],
            "logits_grad": plan["steps"],
        }
        assert step["asr_op_calls"] == calls
        assert 0 < step["busy_us"] <= step["wall_s"] * 1e6
    assert "MISMATCH" not in stdout
    assert f"{plan['groups']} groups, {plan['steps']} steps (T-chunks); wall per step" in stdout
    assert summary["memory_history"] is None  # CUDA only


@pytest.mark.parametrize(
    "name, category",
    [
        ("void (anonymous namespace)::logits_grad_kernel<float, float>(float const*, float const*)", "logits_grad"),
        ("void (anonymous namespace)::log_probs_kernel<c10::BFloat16, float>(c10::BFloat16 const*)", "log_probs"),
        ("void (anonymous namespace)::alphas_betas_kernel<float>(float const*, long const*)", "alphas_betas"),
        ("void (anonymous namespace)::tdt_logits_grad_kernel<float, float>(float const*, float const*)", "logits_grad"),
        ("void (anonymous namespace)::tdt_alphas_betas_kernel<float>(float const*, long const*)", "alphas_betas"),
        ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT", "GEMM"),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off", "GEMM"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(Params)", "GEMM"),
        (
            "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false>(cublasSplitKParams<float>)",
            "GEMM",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>",
            "reduction",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)",
            "elementwise",
        ),
        (
            "void at::native::indexFuncLargeIndex<float, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo)",
            "indexing/cat",
        ),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3, 128, 1>(float*)",
            "indexing/cat",
        ),
        ("Memset (Device)", "memset/memcpy"),
        ("Memcpy HtoD (Pageable -> Device)", "memset/memcpy"),
        ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel", "elementwise"),
        ("some_custom_kernel", "other"),
    ],
)
def test_cuda_kernel_categories(name, category):
    assert profile_loss.cuda_category(name) == category


def test_cpu_op_categories():
    assert profile_loss.cpu_category("asr_plugin::transducer_logits_grad") == "logits_grad"
    assert profile_loss.cpu_category("asr_plugin::tdt_log_probs") == "log_probs"
    assert profile_loss.cpu_category("asr_plugin::tdt_unknown") is None
    assert profile_loss.cpu_category("aten::addmm") == "GEMM"
    assert profile_loss.cpu_category("aten::tanh_") == "elementwise"
    assert profile_loss.cpu_category("aten::index_add_") == "indexing/cat"
    assert profile_loss.cpu_category("aten::view") is None
    assert profile_loss.cpu_category("_SamplewiseTransducerLoss") is None


def test_union_counts_overlaps_once():
    assert profile_loss.union_us([(0, 10), (5, 12), (20, 25), (21, 22)]) == 17
    assert profile_loss.union_us([]) == 0


def _entry(action: str, addr: int, size: int, line: int = 0) -> dict:
    frames = [
        dict(filename=str(profile_loss.REPO_ROOT / "asr_plugin/losses/samplewise.py"), line=line, name="_run_group"),
        dict(filename=str(profile_loss.REPO_ROOT / "scripts/benchmark_loss.py"), line=99, name="step"),
    ]
    return dict(action=action, addr=addr, size=size, stream=0, frames=frames if action == "alloc" else [])


def test_live_at_peak_replays_the_allocator_trace():
    trace = [
        _entry("alloc", 1, 100, line=10),
        _entry("alloc", 2, 300, line=11),
        _entry("free_requested", 1, 100),
        _entry("free_completed", 1, 100),
        _entry("free_requested", 7, 50),  # a block allocated before the recording started
        _entry("alloc", 3, 200, line=12),  # peak: 1000 - 50 + 300 + 200 = 1450
        _entry("free_requested", 2, 300),
        _entry("alloc", 4, 250, line=13),  # 1400: below the peak
    ]
    result = profile_loss.live_at_peak(trace, before_bytes=1000)
    assert (result["peak_bytes"], result["peak_index"]) == (1450, 5)
    assert [(entry["addr"], entry["size"]) for entry in result["live"]] == [(2, 300), (3, 200)]
    assert profile_loss.short_frame(result["live"][0]["frames"]) == "asr_plugin/losses/samplewise.py:11 _run_group"
    # without free_requested entries a block is freed at free_completed
    legacy = [entry for entry in trace if entry["action"] != "free_requested"]
    assert profile_loss.live_at_peak(legacy, before_bytes=0)["peak_bytes"] == 750
    assert profile_loss.short_frame([]).startswith("<no Python frame")


def _event(name: str, start: float, end: float, device_type):
    from torch.autograd.profiler_util import FunctionEvent

    return FunctionEvent(id=0, name=name, thread=1, start_us=start, end_us=end, device_type=device_type)


def test_cuda_step_summary_from_kernel_events(capsys):
    """A CUDA step as the profiler reports it: host ops and runtime calls, kernels on the device timeline."""
    from torch.autograd import DeviceType

    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [
        _event("aten::addmm", 0, 4, cpu),
        _event("cudaLaunchKernel", 1, 3, cpu),
        _event("asr_plugin::transducer_logits_grad", 6, 8, cpu),
        _event("cudaLaunchKernel", 6.5, 7.5, cpu),
        _event("cudaFree", 9, 19, cpu),
        _event("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", 2, 12, cuda),
        _event("void (anonymous namespace)::logits_grad_kernel<float, float>(float const*)", 10, 20, cuda),
        _event("Memset (Device)", 30, 31, cuda),
    ]
    summary = profile_loss.summarise_events(events, "cuda")
    categories = summary["categories"]
    assert (categories["GEMM"], categories["logits_grad"]) == (dict(us=10, calls=1), dict(us=10, calls=1))
    assert categories["memset/memcpy"]["calls"] == 1 and categories["elementwise"]["calls"] == 0
    assert summary["busy_us"] == 19  # [2, 20) and [30, 31): the overlapping kernels count once
    assert summary["host_in_ops_us"] == 6
    assert summary["asr_op_calls"]["logits_grad"] == 1
    assert summary["runtime"] == {"cudaFree": dict(us=10, calls=1), "cudaLaunchKernel": dict(us=3, calls=2)}
    summary.update(
        wall_s=40e-6,
        analysis_s=0.0,
        memory=dict(
            before_bytes=100 * 2**20,
            peak_bytes=300 * 2**20,
            peak_reserved_bytes=320 * 2**20,
            allocator={"num_alloc_retries": 0},
        ),
    )
    # one group of one cell: largest step 160 MiB, inputs etc. 90 MiB, estimated peak 250 MiB
    plan = Plan((0,), (Group(0, (0,), 1, 1, 1),), CellBytes(160 * 2**20), fixed_bytes=90 * 2**20)
    profile_loss.print_step(0, summary, plan, "cuda")
    out = capsys.readouterr().out
    assert "device busy (union of kernels) 0.0 ms, idle fraction 0.525" in out
    assert "CUDA runtime on the host: cudaFree 1x 0.0 ms, cudaLaunchKernel 2x 0.0 ms" in out
    assert "peak - estimate = 50.0 MiB" in out
    assert "alphas_betas 0/1" in out and "MISMATCH" in out
