"""Compile every Triton kernel of the loss for GPUs, on any machine (no GPU, no nvcc: Triton bundles ptxas).

``python -m asr_plugin.losses.triton.compile_check --arch 80,90`` compiles each kernel at the launch
configurations (``configs``) of a few representative shapes and logits dtypes, for each architecture, prints a
table of registers, shared memory and spilled bytes per kernel, and exits non-zero if a compilation fails or a
kernel spills registers. Registers and spills come from ``ptxas -v`` on the kernel's PTX (a loaded kernel would
report them too, but loading needs a GPU).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

# (V, U+1, D): the paper's cell (V = 1024, U = 200), the public benchmark's (V = 500, long transcripts) and a
# test-sized one.
SHAPES = ((1024, 201, 5), (500, 300, 5), (8, 5, 2))
LOGITS_DTYPES = ("fp32", "bf16", "fp16")
_POINTER_TYPES = {  # argument name -> element type; None: the logits' dtype
    "x_ptr": None,
    "g_ptr": None,
    "tgt_ptr": "i64",
    "T_len_ptr": "i64",
    "U_len_ptr": "i64",
    "dur_ptr": "i64",
    "lp_ptr": "fp32",
    "den_ptr": "fp32",
    "alpha_ptr": "fp32",
    "beta_ptr": "fp32",
    "nll_ptr": "fp32",
    "w_ptr": None,
    "bad_ptr": "u8",
    "weights_ptr": "fp32",
    # the flash joint: projections and output layer in the inputs' dtype, float32 gradient buffers
    "enc_ptr": None,
    "pred_ptr": None,
    "b_ptr": None,
    "d_enc_ptr": "fp32",
    "d_pred_ptr": "fp32",
    "d_w_ptr": "fp32",
    "d_b_ptr": "fp32",
}
_SCALAR_TYPES = {"sigma": "fp64", "clamp": "fp64", "fastemit_lambda": "fp64"}  # others: i32


@dataclass(frozen=True)
class KernelCase:
    name: str
    kernel: object  # a triton JITFunction
    logits_dtype: str
    constexprs: dict
    num_warps: int

    def signature(self) -> dict:
        types = {}
        for name in self.kernel.arg_names:
            if name in self.constexprs:
                types[name] = "constexpr"
            elif name in _POINTER_TYPES:
                types[name] = "*" + (_POINTER_TYPES[name] or self.logits_dtype)
            else:
                types[name] = _SCALAR_TYPES.get(name, "i32")
        return types

    def describe(self) -> str:
        blocks = ", ".join(f"{k}={v}" for k, v in self.constexprs.items())
        return f"{self.name} {self.logits_dtype} [{blocks}, warps={self.num_warps}]"


def kernel_cases() -> Iterator[KernelCase]:
    """Every kernel at the configurations the loss launches for ``SHAPES``, each configuration once."""
    from . import flash_joint, grads, recursions, rows
    from .configs import flash_config, recursion_config, row_config

    seen = set()
    for vocab, labels_plus_one, durations in SHAPES:
        rnnt, tdt = row_config(vocab, labels_plus_one), row_config(vocab, labels_plus_one, durations)
        recursion = recursion_config(labels_plus_one)
        for dtype in LOGITS_DTYPES:
            row_blocks = dict(BLOCK_R=rnnt.block_r, BLOCK_V=rnnt.block_v)
            tdt_blocks = dict(BLOCK_R=tdt.block_r, BLOCK_V=tdt.block_v, BLOCK_D=tdt.block_d)
            candidates = [
                KernelCase("rnnt_log_probs", rows.rnnt_log_probs_kernel, dtype, row_blocks, rnnt.num_warps),
                KernelCase("rnnt_logits_grad", grads.rnnt_logits_grad_kernel, dtype, row_blocks, rnnt.num_warps),
                KernelCase("tdt_log_probs", rows.tdt_log_probs_kernel, dtype, tdt_blocks, tdt.num_warps),
                KernelCase("tdt_logits_grad", grads.tdt_logits_grad_kernel, dtype, tdt_blocks, tdt.num_warps),
            ]
            flash = flash_config()  # one configuration for every shape
            flash_blocks = dict(
                HAS_BIAS=True, ACT="tanh", BLOCK_U=flash.block_u, BLOCK_V=flash.block_v, BLOCK_K=flash.block_k
            )
            candidates += [
                KernelCase("flash_log_probs", flash_joint.flash_log_probs_kernel, dtype, flash_blocks, flash.num_warps),
                KernelCase("flash_grads", flash_joint.flash_grads_kernel, dtype, flash_blocks, flash.num_warps),
            ]
            if dtype == "fp32":  # the recursions read float32 log-probs whatever the logits
                blocks = dict(BLOCK_U=recursion.block_u)
                candidates += [
                    KernelCase(
                        "rnnt_alphas_betas", recursions.rnnt_alphas_betas_kernel, dtype, blocks, recursion.num_warps
                    ),
                    KernelCase(
                        "tdt_alphas_betas", recursions.tdt_alphas_betas_kernel, dtype, blocks, recursion.num_warps
                    ),
                ]
            for case in candidates:
                if case.describe() not in seen:
                    seen.add(case.describe())
                    yield case


@dataclass(frozen=True)
class CompileResult:
    case: KernelCase
    arch: int
    registers: int | None = None
    shared_bytes: int | None = None
    spill_bytes: int | None = None  # spill stores + spill loads
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.spill_bytes == 0


_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def ptxas_usage(ptx: str, arch: int) -> tuple[int, int]:
    """(registers, spilled bytes) that ``ptxas -v`` reports for `ptx` on sm_`arch`."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    with tempfile.TemporaryDirectory() as directory:
        source = os.path.join(directory, "kernel.ptx")
        with open(source, "w") as handle:
            handle.write(ptx)
        command = [
            get_ptxas(arch).path,
            "-v",
            f"--gpu-name={sm_arch_from_capability(arch)}",
            source,
            "-o",
            source + ".o",
        ]
        log = subprocess.run(command, check=True, capture_output=True, text=True).stderr
    registers = max(int(m) for m in _PTXAS_REGISTERS.findall(log))
    spills = sum(int(stores) + int(loads) for stores, loads in _PTXAS_SPILLS.findall(log))
    return registers, spills


def compile_case(case: KernelCase, arch: int) -> CompileResult:
    import triton
    from triton.backends.compiler import GPUTarget

    start = time.perf_counter()
    try:
        source = triton.compiler.ASTSource(case.kernel, case.signature(), constexprs=case.constexprs)
        compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": case.num_warps})
        registers, spills = ptxas_usage(compiled.asm["ptx"], arch)
    except Exception as error:  # a compile error is a result to report, not a crash of the check
        return CompileResult(case, arch, seconds=time.perf_counter() - start, error=f"{type(error).__name__}: {error}")
    return CompileResult(case, arch, registers, compiled.metadata.shared, spills, time.perf_counter() - start)


def format_table(results: list[CompileResult]) -> str:
    lines = [f"{'kernel':<72} {'arch':>5} {'regs':>5} {'shared':>7} {'spills':>7} {'s':>5}  status"]
    for r in results:
        status = "ok" if r.ok else ("ERROR " + r.error.splitlines()[0][:200] if r.error else "SPILLS")
        values = (r.registers, r.shared_bytes, r.spill_bytes)
        regs, shared, spills = ("-" if v is None else v for v in values)
        lines.append(
            f"{r.case.describe():<72} sm_{r.arch:<2} {regs:>5} {shared:>7} {spills:>7} {r.seconds:>5.1f}  {status}"
        )
    return "\n".join(lines)


def parse_arches(text: str) -> list[int]:
    try:
        arches = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        arches = []
    if not arches or any(a < 70 for a in arches):
        raise argparse.ArgumentTypeError(f"--arch: comma-separated compute capabilities such as 80,90, got {text!r}")
    return arches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=parse_arches, default=[80, 90], help="compute capabilities, e.g. 80,90")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        parser.error("TRITON_INTERPRET=1 replaces the compiler with the interpreter: unset it for the compile check")
    results = [compile_case(case, arch) for arch in args.arch for case in kernel_cases()]
    print(format_table(results))
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} compilations without error or spill")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
