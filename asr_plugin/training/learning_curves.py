"""Learning curves of a run: per-epoch losses and validation WER from the CSV logger, as a table and a PNG."""

from __future__ import annotations

import csv
from pathlib import Path

import lightning as L
from lightning.pytorch.loggers import CSVLogger

from asr_plugin.files import write_atomic

CURVES = ("train/loss_epoch", "train/transducer_loss_epoch", "train/ctc_loss_epoch", "val/loss", "val/wer")
# (metric, label): with auxiliary CTC the training loss is a mix, so its transducer part is drawn instead
LOSS_LINES = (
    ("train/transducer_loss_epoch", "train transducer loss"),
    ("train/ctc_loss_epoch", "train CTC loss"),
    ("val/loss", "validation transducer loss"),
)


def read_epoch_curves(metrics_csv: str | Path) -> dict[str, dict[int, float]]:
    """{metric: {epoch: value}} for the per-epoch metrics in CURVES of a Lightning CSVLogger ``metrics.csv``
    (step-level rows, which leave these columns empty, are skipped)."""
    path = Path(metrics_csv)
    if not path.is_file():
        raise ValueError(f"metrics_csv={str(path)!r} is not a file")
    curves: dict[str, dict[int, float]] = {name: {} for name in CURVES}
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            for name in CURVES:
                if row.get(name):
                    curves[name][int(row["epoch"])] = float(row[name])
    return curves


def plot_learning_curves(metrics_csv: str | Path, png: str | Path) -> Path:
    """Writes losses (left) and validation WER in % (right) per epoch to `png`; returns its path."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    curves = read_epoch_curves(metrics_csv)
    figure, (losses, wer) = plt.subplots(1, 2, figsize=(10, 4))
    lines = (
        LOSS_LINES if curves["train/transducer_loss_epoch"] else (("train/loss_epoch", "train loss"),) + LOSS_LINES[2:]
    )
    for name, label in lines:
        points = sorted(curves[name].items())
        if points:
            losses.plot(*zip(*points), marker="o", markersize=3, label=label, linestyle="--" if "CTC" in label else "-")
    losses.set(xlabel="epoch", ylabel="loss per utterance (nats)", yscale="log", title="Losses")
    losses.legend()
    points = sorted(curves["val/wer"].items())
    if points:
        epochs, values = zip(*points)
        wer.plot(epochs, [100 * value for value in values], marker="o", markersize=3, color="tab:red")
    wer.set(xlabel="epoch", ylabel="WER (%)", title="Validation WER (greedy)", ylim=(0, None))
    wer.grid(alpha=0.3)
    figure.tight_layout()
    out = write_atomic(png, lambda tmp: figure.savefig(tmp, dpi=100))  # the format from the kept suffix
    plt.close(figure)
    return out


def learning_curves_of(trainer: L.Trainer, png: str | Path) -> Path | None:
    """Plots the run's curves from the trainer's CSVLogger into `png` on global rank 0; None without one, or
    when it logged nothing (a run resumed at its last step)."""
    csv_logger = next((logger for logger in trainer.loggers if isinstance(logger, CSVLogger)), None)
    if csv_logger is None or not trainer.is_global_zero:
        return None
    csv_logger.save()
    metrics = Path(csv_logger.log_dir) / "metrics.csv"
    return plot_learning_curves(metrics, png) if metrics.is_file() else None
