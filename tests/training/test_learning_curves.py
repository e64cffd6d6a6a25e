"""Learning curves: per-epoch values read back from a CSVLogger file and drawn as a PNG."""

from __future__ import annotations

import pytest

from asr_plugin.training.learning_curves import plot_learning_curves, read_epoch_curves

METRICS = """epoch,step,train/grad_norm,train/loss_epoch,train/loss_step,train/lr,val/loss,val/wer
0,4,5.0,,90.0,0.001,,
0,9,,,,,40.0,0.9
0,9,,80.0,,,,
1,14,4.0,,30.0,0.002,,
1,19,,,,,20.0,0.5
1,19,,25.0,,,,
"""


def test_reads_per_epoch_values_and_skips_step_rows(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(METRICS)
    curves = read_epoch_curves(path)
    assert curves == {
        "train/loss_epoch": {0: 80.0, 1: 25.0},
        "train/transducer_loss_epoch": {},
        "train/ctc_loss_epoch": {},
        "val/loss": {0: 40.0, 1: 20.0},
        "val/wer": {0: 0.9, 1: 0.5},
    }


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(METRICS)
    png = plot_learning_curves(path, tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="metrics_csv=.*nothing.csv"):
        read_epoch_curves(tmp_path / "nothing.csv")


def test_with_auxiliary_ctc_the_transducer_part_is_drawn(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(
        "epoch,step,train/loss_epoch,train/transducer_loss_epoch,train/ctc_loss_epoch,val/loss,val/wer\n"
        "0,9,30.0,20.0,50.0,25.0,0.8\n1,19,10.0,5.0,20.0,8.0,0.3\n"
    )
    curves = read_epoch_curves(path)
    assert curves["train/transducer_loss_epoch"] == {0: 20.0, 1: 5.0} and curves["train/ctc_loss_epoch"][1] == 20.0
    assert plot_learning_curves(path, tmp_path / "c.png").stat().st_size > 5000
