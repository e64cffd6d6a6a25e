"""The Triton compile check: kernels compile for GPUs on this machine (no GPU) and their register use is read
(the whole check, every kernel and architecture, runs in CI: `python -m asr_plugin.losses.triton.compile_check`)."""

from __future__ import annotations

import argparse

import pytest

from asr_plugin.losses.triton import compile_check


def test_a_kernel_compiles_for_hopper_without_spills():
    case = next(case for case in compile_check.kernel_cases() if case.name == "rnnt_logits_grad")
    result = compile_check.compile_case(case, 90)
    assert result.error is None and result.ok
    assert 0 < result.registers <= 255
    table = compile_check.format_table([result])
    assert "rnnt_logits_grad" in table and "sm_90" in table


def test_every_kernel_has_cases():
    names = {case.name for case in compile_check.kernel_cases()}
    assert names == {
        "rnnt_log_probs",
        "rnnt_logits_grad",
        "rnnt_alphas_betas",
        "tdt_log_probs",
        "tdt_logits_grad",
        "tdt_alphas_betas",
        "flash_log_probs",
        "flash_grads",
    }


def test_a_compile_error_is_reported_not_raised():
    case = next(compile_check.kernel_cases())
    broken = compile_check.KernelCase(case.name, case.kernel, "fp32", dict(case.constexprs, BLOCK_V=3), case.num_warps)
    result = compile_check.compile_case(broken, 80)  # arange needs a power of 2
    assert result.error and not result.ok
    assert "ERROR" in compile_check.format_table([result])


@pytest.mark.parametrize("text", ["", "sm_90", "60"])
def test_bad_arch_lists_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="--arch"):
        compile_check.parse_arches(text)
