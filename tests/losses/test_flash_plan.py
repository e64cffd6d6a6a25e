"""The flash joint in the sample-wise planner, without running a kernel: its memory model
(``planning.flash_cell_bytes``: nothing per cell grows with V or H, the rows carry H), the groups a budget gives
with it, and when the sample-wise loss chooses it (``runner_choice.choose_flash``). The runs themselves are in
tests/losses/triton/test_flash_samplewise.py (Triton's interpreter)."""

from __future__ import annotations

import pytest
import torch

from asr_plugin.losses import RNNT, TDT, SamplewiseOptions, TransducerLoss, runner_choice
from asr_plugin.losses.planning import CellBytes, cell_bytes, flash_cell_bytes, plan_groups
from asr_plugin.models import Joint

CUDA = torch.device("cuda")  # choose_flash only reads the device's type: no GPU is needed to ask it


def choose_flash(flash_joint, joint, lattice, device, dtype, backend) -> bool:
    """The runner choice of a call with these options on `device`, the joint's output in `dtype`."""
    options = SamplewiseOptions(lattice, flash_joint=flash_joint, backend=backend)
    return runner_choice.choose_flash(joint, options, device, dtype)


def test_flash_cell_bytes_are_the_lattice_statistics_and_the_rows():
    cost = flash_cell_bytes(hidden=512, projection_dtype=torch.float32, input_width=640, input_dtype=torch.float32)
    # per cell: RNN-T log-probs [blank, label], denominator, alpha, beta (5 float32) + 4 slack; nothing per step
    assert cost == CellBytes(step=0, lattice=24, row=512 * (4 + 4 + 4) + 2 * 640 * 4)
    bf16 = flash_cell_bytes(512, torch.bfloat16, 640, torch.bfloat16)
    assert bf16 == CellBytes(step=0, lattice=24, row=512 * (2 + 4 + 2) + 2 * 640 * 2)
    # the fused runner's cell at the same H and a V of 500 is ~190x the flash joint's
    assert cell_bytes(500, torch.float32, 512, torch.float32, hidden_copies=2).total > 190 * cost.total


def test_group_bytes_count_cells_and_rows():
    cost = CellBytes(step=0, lattice=24, row=100)
    assert cost.group_bytes(3, 10, 5) == 3 * (10 * 5 * 24 + (10 + 5) * 100)
    plan = plan_groups((10,) * 3, (4,) * 3, budget=10**9, bytes_per_cell=cost)
    assert plan.step_bytes() == cost.group_bytes(3, 10, 5)


def test_flash_groups_under_a_budget_follow_the_flash_model():
    """500 frames x 101 label positions at H = 512: a sample costs 1.2 MB of lattice and 6.2 MB of rows, so a
    64 MiB (67.1 MB) budget takes 9 samples per group (10 would be 73.7 MB); the fused model fits none whole."""
    cost = flash_cell_bytes(512, torch.float32, 512, torch.float32)
    per_sample = 500 * 101 * 24 + (500 + 101) * cost.row
    budget = 64 * 2**20
    fitting = budget // per_sample
    assert fitting == 9
    plan = plan_groups((500,) * 20, (100,) * 20, budget, cost, runner="flash")
    assert [len(group.samples) for group in plan.groups] == [9, 9, 2]
    assert all(group.chunk == group.frames for group in plan.groups)
    assert plan.step_bytes() == 9 * per_sample <= budget
    assert "(flash joint)" in plan.describe()
    fused = plan_groups((500,) * 20, (100,) * 20, budget, cell_bytes(500, torch.float32, 512, torch.float32, 2))
    assert len(fused.groups) == 20 and all(group.chunk < group.frames for group in fused.groups)


def test_a_flash_sample_over_the_budget_is_not_chunked():
    """With no step bytes a T-chunk saves nothing: the sample stays whole (its estimate then exceeds the
    budget, which describe() shows) instead of a division by zero."""
    cost = flash_cell_bytes(64, torch.float32, 64, torch.float32)
    plan = plan_groups((1000,), (200,), budget=10**5, bytes_per_cell=cost)
    (group,) = plan.groups
    assert group.chunk == 1000 and plan.steps == 1 and plan.step_bytes() > 10**5


def standard_joint(**options):
    return Joint(8, 8, 16, 12, **options)


def test_auto_chooses_flash_on_cuda_only_when_it_can_run():
    assert choose_flash("auto", standard_joint(), RNNT(), CUDA, torch.float32, "auto")
    assert choose_flash("auto", standard_joint(activation="relu"), RNNT(clamp=1.0), CUDA, torch.bfloat16, "triton")
    declined = [
        (standard_joint(dropout=0.1), RNNT(), torch.float32, "auto"),  # training-mode dropout
        (standard_joint(activation="gelu"), RNNT(), torch.float32, "auto"),
        (standard_joint(), RNNT(fastemit_lambda=1e-3), torch.float32, "auto"),
        (Joint(8, 8, 16, 12, num_extra_outputs=3), TDT([0, 1, 2]), torch.float32, "auto"),
        (standard_joint(), RNNT(), torch.float64, "auto"),
        (standard_joint(), RNNT(), torch.float32, "cuda"),
        (lambda enc, pred: enc[:, :, None] + pred[:, None], RNNT(), torch.float32, "auto"),
    ]
    for joint, lattice, dtype, backend in declined:
        assert not choose_flash("auto", joint, lattice, CUDA, dtype, backend)
    assert choose_flash("auto", standard_joint(dropout=0.1).eval(), RNNT(), CUDA, torch.float32, "auto")
    # the CPU keeps the C++ kernels and the fused runner; "never" never runs it
    assert not choose_flash("auto", standard_joint(), RNNT(), torch.device("cpu"), torch.float32, "auto")
    assert not choose_flash("never", standard_joint(), RNNT(), CUDA, torch.float32, "auto")


@pytest.mark.parametrize(
    "joint, lattice, dtype, backend, reason",
    [
        (standard_joint(dropout=0.1), RNNT(), torch.float32, "auto", "joint dropout 0.1 in training mode"),
        (standard_joint(activation="gelu"), RNNT(), torch.float32, "auto", "activation 'gelu'"),
        (standard_joint(), RNNT(fastemit_lambda=1e-3), torch.float32, "auto", "without FastEmit"),
        (Joint(8, 8, 16, 12, num_extra_outputs=3), TDT([0, 1, 2]), torch.float32, "auto", "3 extra outputs"),
        (standard_joint(), RNNT(), torch.float64, "auto", "float64"),
        (standard_joint(), RNNT(), torch.float32, "cuda", "backend='cuda'"),
        (lambda enc, pred: enc, RNNT(), torch.float32, "auto", "function is not a standard joint"),
    ],
)
def test_always_names_why_flash_cannot_run(joint, lattice, dtype, backend, reason):
    with pytest.raises(ValueError, match=f"flash_joint='always'.*{reason}"):
        choose_flash("always", joint, lattice, CUDA, dtype, backend)


def test_always_on_the_cpu_needs_the_interpreter():
    """This process runs without TRITON_INTERPRET (tests/losses/triton runs with it)."""
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        choose_flash("always", standard_joint(), RNNT(), torch.device("cpu"), torch.float32, "auto")


def test_flash_joint_option_is_checked_by_name():
    with pytest.raises(ValueError, match=r"flash_joint must be one of \('auto', 'always', 'never'\), got 'yes'"):
        TransducerLoss("samplewise", flash_joint="yes")
    assert "flash_joint='never'" in repr(TransducerLoss("samplewise", flash_joint="never"))
