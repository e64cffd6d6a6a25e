"""The GPU check's stages, in the order they matter, and the same stages at CPU sizes (the dry run).

The Triton backend comes first and needs no build (Triton compiles its kernels itself): its GPU tests, the
paper cell in bf16 over Triton, then (after the CUDA C++ build) the side-by-side run at the public benchmark's
shapes (Triton, CUDA C++, torchaudio, and the flash joint last), the CUDA C++ tests and the paper cells over CUDA C++. The limits of
these sum to under the total; the stages after them (TF32, TDT, smoke, profiles) run when time is left, and the
total's remainder cuts or skips them. The Triton stages' expected seconds are estimates (not run on a GPU yet).

GPU (one H200, one device command of at most 10 minutes): the limits up to paper-fp32 sum to 520 s, under the
540 s total.
Expected seconds come from the one H200 run so far (docs/loss.md, "GPU: the CUDA C++ kernels"): the `paper` part
(build, CUDA tests, the fp32 and bf16 paper cells) took 3 min 37 s; a paper cell is one warm-up step plus the timed
steps (fp32 192 MiB 18.05 s, 1 GiB 14.41 s; bf16 512 MiB 4.82 s, 1 GiB 2.85 s per step) plus ~6 s to start
and build the inputs. The 160 MiB fp32 cell, the TF32 cell, the smoke and the profiles have not run on a GPU:
their figures are estimates (TF32: the output-layer GEMMs, ~11 s of an fp32 step, on tensor cores; the
profiles: B=128, an eighth of the paper batch, four steps and the event analysis).
"""

from __future__ import annotations

from gpucheck.stages import Stage
from gpucheck.tables import benchmark_table, junit_table, profile_table, smoke_table

GPU_TOTAL_S = 540.0
CPU_TOTAL_S = 1500.0
# every test marked cuda under tests/losses: the kernels against the CPU, the fused joint with and without dropout;
# "auto" means Triton for CUDA tensors, so the Triton stage runs all of them but the CUDA C++ ones
CUDA_TESTS = "tests/losses"
TRITON_TESTS = "not cuda_cpp_kernels and not test_cuda_sources_compile"
CUDA_CPP_TESTS = "cuda_cpp_kernels or test_cuda_sources_compile"
PROFILE_CELL = ("--B", "128", "--T", "1000", "--U", "200", "--H", "512", "--V", "1024", "--joint", "standard")
# A tiny lattice for the CPU: T-chunked at 4 KiB, so the profile sees several plan steps
CPU_PROFILE_CELL = ("--B", "2", "--T", "20", "--U", "5", "--H", "8", "--V", "16", "--joint", "standard")


def _stages(python: str, device: str, limits: dict[str, float], expected: dict[str, float | None]) -> list[Stage]:
    cuda = device == "cuda"
    # on the CPU (dry run) the Triton kernels run under the interpreter, switched on before the process starts
    triton_env = [] if cuda else ["env", "TRITON_INTERPRET=1"]
    bench_base = [python, "scripts/benchmark_loss.py", "--device", device, "--out", "{dir}"]
    bench = bench_base + (["--preset", "paper"] if cuda else ["--preset", "dry", "--modes", "samplewise"])
    bench_tdt = bench_base + (["--preset", "paper-tdt"] if cuda else ["--preset", "dry-tdt", "--modes", "samplewise"])
    profile = [
        python,
        "scripts/profile_loss.py",
        "--device",
        device,
        *(PROFILE_CELL if cuda else CPU_PROFILE_CELL),
        "--steps",
        "1",
        "--out",
        "{dir}",
    ]
    # the smoke's corpus and run logs go next to the stage directory, not into it (nor into the archive)
    # (the smoke starts no run it cannot finish within the stage's limit)
    smoke = [
        "bash",
        "scripts/gpu_smoke_train.sh",
        "--quick" if cuda else "--dry-run",
        "--out",
        "{dir}",
        "--work-dir",
        "{dir}.work",
        "--time-limit",
        "{limit}",
    ]
    build = ("build",)

    def stage(name: str, command: list[str], **kwargs) -> Stage:
        return Stage(name, command, limits[name], expected[name], **kwargs)

    pytest = [
        python,
        "-m",
        "pytest",
        "-m",
        "cuda",
        CUDA_TESTS,
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "--junitxml={dir}/junit.xml",
    ]
    side_by_side = bench_base + (
        ["--preset", "benchmark-b30", "--backends", "triton,cuda"]
        if cuda
        else ["--preset", "dry", "--backends", "triton,cpp"]
    )
    return [
        stage("triton-tests", triton_env + pytest + ["-k", TRITON_TESTS], table=junit_table),
        # (one timed step on the CPU: the interpreter takes seconds per step even at the quick cell)
        stage(
            "triton-paper-bf16",
            triton_env
            + bench
            + ["--dtype", "bf16-autocast", "--repeats", "2" if cuda else "1", "--backends", "triton"],
            table=benchmark_table(),
        ),
        stage("build", [python, "-m", "asr_plugin.losses.build", *(["--cuda"] if cuda else [])]),
        stage(
            "side-by-side",
            triton_env + side_by_side + ["--dtype", "fp32", "--repeats", "3" if cuda else "1"],
            needs=build,
            table=benchmark_table(target_dtype=False),
        ),
        stage("cuda-tests", pytest + ["-k", CUDA_CPP_TESTS], needs=build, table=junit_table),
        stage(
            "paper-bf16",
            bench + ["--dtype", "bf16-autocast", "--repeats", "2", "--backends", "cuda" if cuda else "cpp"],
            needs=build,
            table=benchmark_table(),
        ),
        stage(
            "paper-fp32",
            bench + ["--dtype", "fp32", "--repeats", "1", "--backends", "cuda" if cuda else "cpp"],
            needs=build,
            table=benchmark_table(),
        ),
        stage(
            "paper-fp32-tf32",
            [python, "-m", "gpucheck.tf32", *bench[1:], "--dtype", "fp32", "--repeats", "1"],
            needs=build,
            table=benchmark_table(target_dtype=False),
        ),
        # TDT (D = 5) at the paper's scale, bf16 at the bf16 target's budget and at 1 GiB: reported, not judged
        stage(
            "paper-tdt",
            bench_tdt + ["--dtype", "bf16-autocast", "--repeats", "1"],
            needs=build,
            table=benchmark_table(target_dtype=False),
        ),
        stage("train-smoke", smoke, needs=build, table=smoke_table),
        stage(
            "profile-bf16",
            profile + ["--dtype", "bf16-autocast", "--memory-budget", "512MiB" if cuda else "4KiB"],
            needs=build,
            table=profile_table,
        ),
        stage(
            "profile-fp32",
            profile + ["--dtype", "fp32", "--memory-budget", "192MiB" if cuda else "4KiB"],
            needs=build,
            table=profile_table,
        ),
    ]


def gpu_stages(python: str) -> list[Stage]:
    """The check on one GPU: limits sum to under `GPU_TOTAL_S`; expected seconds as the module says."""
    # build and CUDA tests: the b45418b figures (55 s, 25 s) grown by the TDT kernels' second .cu file and their tests
    # (estimates); paper-tdt: 2 cells x 2 steps at ~1.2x the RNN-T bf16 step times, plus the start (estimate)
    # triton-tests: the CUDA tests at ~1 s of Triton compilation per kernel and dtype (estimate); triton-paper-bf16:
    # the bf16 paper cells' steps as over CUDA C++ plus compilation (estimate); side-by-side: 2 backends x 2 modes,
    # torchaudio and the flash joint, 4 steps each at B=30 (estimate; the flash joint's ~5.6 TFLOP of float32
    # tl.dot per step and its atomic adds have never run: 30 s of the limit are its own, and its row comes last, so
    # a cut loses only it); cuda-tests: the CUDA C++ tests only now (estimate)
    limits = {
        "triton-tests": 60,
        "triton-paper-bf16": 55,
        "build": 95,
        "side-by-side": 100,
        "cuda-tests": 40,
        "paper-bf16": 45,
        "paper-fp32": 125,
        "paper-fp32-tf32": 55,
        "paper-tdt": 35,
        "train-smoke": 60,
        "profile-bf16": 25,
        "profile-fp32": 28,
    }
    expected = {
        "triton-tests": 40,
        "triton-paper-bf16": 40,
        "build": 65,
        "side-by-side": 75,
        "cuda-tests": 30,
        "paper-bf16": 29,
        "paper-fp32": 105,
        "paper-fp32-tf32": 45,
        "paper-tdt": 24,
        "train-smoke": 55,
        "profile-bf16": 18,
        "profile-fp32": 24,
    }
    return _stages(python, "cuda", limits, expected)


def cpu_stages(python: str) -> list[Stage]:
    """The dry run: the same stages at CPU sizes (the dry benchmark presets, micro smoke, tiny profiles), then
    a stage that sleeps past its limit and must be reported cut."""
    # side-by-side: the flash joint's row under the interpreter took 77 s per step (41 s of CPU) at the quick cell on
    # this 2-core machine under a load of ~6, one warm-up and one timed step; the stage's other rows ~70 s
    limits = {
        "triton-tests": 120,
        "triton-paper-bf16": 240,
        "build": 300,
        "side-by-side": 480,
        "cuda-tests": 120,
        "paper-bf16": 120,
        "paper-fp32": 120,
        "paper-fp32-tf32": 120,
        "paper-tdt": 120,
        "train-smoke": 240,
        "profile-bf16": 90,
        "profile-fp32": 90,
    }
    stages = _stages(python, "cpu", limits, dict.fromkeys(limits))
    stages.append(
        Stage(
            "limit-check",
            [python, "-c", "import time; print('sleeping past the limit', flush=True); time.sleep(60)"],
            limit_s=3,
            expected_s=3,
            expect="timed_out",
        )
    )
    return stages
