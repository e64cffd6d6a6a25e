"""The GPU check's stages, in the order they matter, and the same stages at CPU sizes (the dry run).

GPU (one H200, one device command of at most 10 minutes): the limits sum to 538 s, under the 540 s total.
Expected seconds come from the one H200 run so far (docs/loss.md, "GPU (measured once, H200)"): the `paper` part (build,
CUDA tests, the fp32 and bf16 paper cells) took 3 min 37 s; a paper cell is one warm-up step plus the timed
steps (fp32 192 MiB 18.05 s, 1 GiB 14.41 s; bf16 512 MiB 4.82 s, 1 GiB 2.85 s per step) plus ~6 s to start
and build the inputs. The 160 MiB fp32 cell, the TF32 cell, the smoke and the profiles have not run on a GPU:
their figures are estimates (TF32: the output-layer GEMMs, ~11 s of an fp32 step, on tensor cores; the
profiles: B=128, an eighth of the paper batch, four steps and the event analysis).
"""

from __future__ import annotations

from asr_plugin.gpucheck.stages import Stage
from asr_plugin.gpucheck.tables import benchmark_table, junit_table, profile_table, smoke_table

GPU_TOTAL_S = 540.0
CPU_TOTAL_S = 1500.0
# every test marked cuda under tests/losses: the kernels against the CPU, the fused joint with and without dropout
CUDA_TESTS = "tests/losses"
PROFILE_CELL = ("--B", "128", "--T", "1000", "--U", "200", "--H", "512", "--V", "1024", "--joint", "standard")
# A tiny lattice for the CPU: T-chunked at 4 KiB, so the profile sees several plan steps
CPU_PROFILE_CELL = ("--B", "2", "--T", "20", "--U", "5", "--H", "8", "--V", "16", "--joint", "standard")


def _stages(python: str, device: str, limits: dict[str, float], expected: dict[str, float | None]) -> list[Stage]:
    cuda = device == "cuda"
    bench_base = [python, "scripts/benchmark_loss.py", "--device", device, "--out", "{dir}"]
    bench = bench_base + (["--preset", "paper"] if cuda else ["--preset", "quick", "--modes", "samplewise"])
    bench_tdt = bench_base + (["--preset", "paper-tdt"] if cuda else ["--preset", "quick-tdt", "--modes", "samplewise"])
    profile = [python, "scripts/profile_loss.py", "--device", device, *(PROFILE_CELL if cuda else CPU_PROFILE_CELL),
               "--steps", "1", "--out", "{dir}"]
    # the smoke's corpus and run logs go next to the stage directory, not into it (nor into the archive)
    # (the smoke starts no run it cannot finish within the stage's limit)
    smoke = ["bash", "scripts/gpu_smoke_train.sh", "--quick" if cuda else "--dry-run", "--out", "{dir}",
             "--work-dir", "{dir}.work", "--time-limit", "{limit}"]
    build = ("build",)

    def stage(name: str, command: list[str], **kwargs) -> Stage:
        return Stage(name, command, limits[name], expected[name], **kwargs)

    return [
        stage("build", [python, "-m", "asr_plugin.losses.build", *(["--cuda"] if cuda else [])]),
        stage("cuda-tests", [python, "-m", "pytest", "-m", "cuda", CUDA_TESTS, "-q", "-rs", "-p", "no:cacheprovider",
                             "--junitxml={dir}/junit.xml"], needs=build, table=junit_table),
        stage("paper-bf16", bench + ["--dtype", "bf16-autocast", "--repeats", "2"], needs=build, table=benchmark_table()),
        stage("paper-fp32", bench + ["--dtype", "fp32", "--repeats", "1"], needs=build, table=benchmark_table()),
        stage("paper-fp32-tf32", [python, "-m", "asr_plugin.gpucheck.tf32", *bench[1:], "--dtype", "fp32", "--repeats", "1"],
              needs=build, table=benchmark_table(target_dtype=False)),
        # TDT (D = 5) at the paper's scale, bf16 at the bf16 target's budget and at 1 GiB: reported, not judged
        stage("paper-tdt", bench_tdt + ["--dtype", "bf16-autocast", "--repeats", "1"], needs=build,
              table=benchmark_table(target_dtype=False)),
        stage("train-smoke", smoke, needs=build, table=smoke_table),
        stage("profile-bf16", profile + ["--dtype", "bf16-autocast", "--memory-budget", "512MiB" if cuda else "4KiB"],
              needs=build, table=profile_table),
        stage("profile-fp32", profile + ["--dtype", "fp32", "--memory-budget", "192MiB" if cuda else "4KiB"],
              needs=build, table=profile_table),
    ]


def gpu_stages(python: str) -> list[Stage]:
    """The check on one GPU: limits sum to under `GPU_TOTAL_S`; expected seconds as the module says."""
    # build and CUDA tests: the b45418b figures (55 s, 25 s) grown by the TDT kernels' second .cu file and their tests
    # (estimates); paper-tdt: 2 cells x 2 steps at ~1.2x the RNN-T bf16 step times, plus the start (estimate)
    limits = {"build": 95, "cuda-tests": 70, "paper-bf16": 45, "paper-fp32": 125, "paper-fp32-tf32": 55,
              "paper-tdt": 35, "train-smoke": 60, "profile-bf16": 25, "profile-fp32": 28}
    expected = {"build": 65, "cuda-tests": 45, "paper-bf16": 29, "paper-fp32": 105, "paper-fp32-tf32": 45,
                "paper-tdt": 24, "train-smoke": 55, "profile-bf16": 18, "profile-fp32": 24}
    return _stages(python, "cuda", limits, expected)


def cpu_stages(python: str) -> list[Stage]:
    """The dry run: the same stages at CPU sizes (quick benchmark preset, micro smoke, tiny profiles), then
    a stage that sleeps past its limit and must be reported cut."""
    limits = {"build": 300, "cuda-tests": 120, "paper-bf16": 120, "paper-fp32": 120, "paper-fp32-tf32": 120,
              "paper-tdt": 120, "train-smoke": 240, "profile-bf16": 90, "profile-fp32": 90}
    stages = _stages(python, "cpu", limits, dict.fromkeys(limits))
    stages.append(Stage("limit-check", [python, "-c", "import time; print('sleeping past the limit', flush=True); time.sleep(60)"],
                        limit_s=3, expected_s=3, expect="timed_out"))
    return stages
