"""The training smoke: does the LibriSpeech recipe train at full utterance length, and how large a batch fits?

Everything runs through the recipe's own objects: the experiment config composed by Hydra (default
``experiment=librispeech_medium`` with the model preset swapped), its ``TransducerDataModule`` (manifests,
tokenizer and stats prepared into a work directory), ``TransducerModule`` (SpecAugment, auxiliary CTC, the
loss mode) and a Lightning ``Trainer`` in the experiment's precision (bf16-mixed) and clipping, on one
device. The corpus is a LibriSpeech-layout folder of long utterances (``scripts/make_synthetic_librispeech.py
--min-seconds 35 --max-seconds 40``); speed perturbation is off and there is one duration bucket, so a
batch of ``batch * max_seconds`` padded seconds holds exactly `batch` utterances.

For each model (``conf/model/<preset>.yaml`` with its vocabulary size) and loss mode, in priority order:

1. a throughput run: `steps` optimizer steps of `batch` utterances: utterances/s and audio-seconds/s
   (Lightning's ``ThroughputMonitor`` over the steps after the first), peak memory per step
   (``train/peak_memory_mib``), the first and last training loss and whether every loss was finite;
2. with ``search``: the largest batch that trains (three steps per try; CUDA out of memory = does not fit):
   doubling from `search_start`, then bisecting until the gap is at most an eighth of the batch, within
   `max_trials` tries, capped at the corpus size (a cap that fits is reported as such).

``smoke.json`` (``gpucheck.smoke_results``) is rewritten
atomically after every run, so a smoke cut short keeps what finished; a run that would start with less than
`min_run_s` of `time_limit_s` left is reported skipped.

    PYTHONPATH=scripts python -m gpucheck.smoke --corpus /tmp/smoke/LibriSpeech --out /tmp/smoke/results --search
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ThroughputMonitor
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.utilities.memory import garbage_collection_cuda, is_oom_error
from omegaconf import DictConfig, open_dict

from asr_plugin.data.sources.manifest import read_manifest
from asr_plugin.files import write_text_atomic
from asr_plugin.training.run_start import RunStart, build_module
from gpucheck.smoke_results import render_results

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
SPLIT = "train-clean-100"
# Tries run 3 steps: the optimizer's state is allocated at the end of step 1, and an epoch holds at most one
# smaller (remainder) batch, so step 2 or 3 runs a full batch with that state allocated.
PROBE_STEPS = 3


@dataclass(frozen=True)
class ModelSpec:
    """A model preset (``conf/model/<preset>.yaml``) and the tokenizer size it is trained with."""

    preset: str
    vocab_size: int

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        preset, sep, vocab = text.partition(":")
        if not preset or not sep or not vocab.isdigit() or int(vocab) < 3:
            raise ValueError(f"--models wants PRESET:VOCAB entries (e.g. medium:500), got {text!r}")
        if not (CONF_DIR / "model" / f"{preset}.yaml").is_file():
            raise ValueError(f"--models: no model preset conf/model/{preset}.yaml")
        return cls(preset, int(vocab))


@dataclass
class SmokeSettings:
    corpus: Path
    work_dir: Path
    experiment: str = "librispeech_medium"
    device: str = "cuda"
    batch: int = 32
    steps: int = 6
    max_seconds: float = 40.0
    memory_budget: str = "2GiB"
    num_workers: int = 8
    search: bool = False
    search_start: int = 8
    max_trials: int = 8
    overrides: Sequence[str] = field(default_factory=tuple)


def compose_config(settings: SmokeSettings, model: ModelSpec, mode: str, batch: int) -> DictConfig:
    """The experiment's config with the smoke's model, data and loss (the Trainer is set up in `train_steps`):
    one duration bucket, no speed perturbation and ``batch * max_seconds`` padded seconds per batch, so that
    every batch holds `batch` utterances."""
    overrides = [
        f"experiment={settings.experiment}",
        f"model={model.preset}",
        f"paths.root_dir={settings.work_dir}",
        f"paths.output_dir={settings.work_dir}/runs",
        f"data.root={settings.corpus}",
        f"data.work_dir={settings.work_dir / 'data'}",
        f"data.train_splits=[{SPLIT}]",
        f"data.valid_splits=[{SPLIT}]",
        f"data.test_splits=[{SPLIT}]",
        f"data.vocab_size={model.vocab_size}",
        f"data.num_workers={settings.num_workers}",
        f"data.prepare_num_workers={max(1, settings.num_workers)}",
        f"data.pin_memory={settings.device == 'cuda'}",
        f"data.max_duration={batch * settings.max_seconds}",
        "data.num_buckets=1",
        "data.speed_perturb=null",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides + list(settings.overrides))
    with open_dict(cfg):
        cfg.loss.mode = mode
        cfg.loss.memory_budget = settings.memory_budget if mode == "samplewise" else None
    return cfg


def prepared_datamodule(cfg: DictConfig):
    """The experiment's data module with manifests, tokenizer and stats made (into the work directory)."""
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def _metrics(path: Path) -> dict[str, list[float]]:
    columns: dict[str, list[float]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            for key, value in row.items():
                if value not in ("", None):
                    columns.setdefault(key, []).append(float(value))
    return columns


def train_steps(cfg: DictConfig, datamodule, module, steps: int, run_dir: Path, device: str) -> dict:
    """`steps` optimizer steps of `module` on `datamodule`'s batches with the experiment's Trainer settings
    (one device); the throughput, peak memory and losses read back from the run's CSV metrics."""
    window = max(2, steps - 1)  # the rates leave out the first step (extension load, cuDNN and allocator warm-up)
    monitor = ThroughputMonitor(
        batch_size_fn=len, length_fn=lambda batch: int(batch.feature_lengths.sum()), window_size=window
    )
    logger = CSVLogger(run_dir, name="", version="")
    accelerator = (
        dict(accelerator="gpu", precision=cfg.trainer.precision)
        if device == "cuda"
        else dict(accelerator="cpu", precision="32-true")
    )
    trainer = instantiate(
        cfg.trainer,
        devices=1,
        num_nodes=1,
        strategy="auto",
        sync_batchnorm=False,
        max_steps=steps,
        max_epochs=-1,
        limit_train_batches=None,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        default_root_dir=str(run_dir),
        logger=logger,
        callbacks=[monitor],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        **accelerator,
    )
    try:
        trainer.fit(module, datamodule=datamodule)
        metrics = _metrics(Path(logger.log_dir) / "metrics.csv")
    finally:
        module.trainer = None  # the Trainer holds the optimizer's state: let it go with the Trainer
        del trainer
    hop_s = datamodule.frontend.hop_length / datamodule.frontend.sample_rate
    losses = metrics.get("train/loss_step", [])
    samples, batches = metrics.get("train/device/samples_per_sec"), metrics.get("train/device/batches_per_sec")
    items = metrics.get("train/device/items_per_sec")
    peaks = metrics.get("train/peak_memory_mib")
    return dict(
        utterances_per_step=samples[-1] / batches[-1] if samples and batches else None,
        utterances_per_s=samples[-1] if samples else None,
        audio_s_per_s=items[-1] * hop_s if items else None,
        peak_mib=max(peaks) if peaks else None,
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        loss_finite=all(math.isfinite(x) for x in losses) if losses else None,
    )


def largest_fitting(
    fits: Callable[[int], bool], start: int, cap: int, max_trials: int, out_of_time: Callable[[], bool] = lambda: False
) -> dict:
    """The largest batch in [1, cap] for which `fits` holds, assuming it holds below some size and not above.

    Doubles from `start` (or starts at `cap` when smaller) until a try fails or `cap` fits, then bisects
    until the gap between the largest fit and the smallest failure is at most max(1, fit // 8). Stops early
    after `max_trials` tries or when `out_of_time()`; returns the bracket found so far and every try.
    """
    if start < 1 or cap < 1 or max_trials < 1:
        raise ValueError(f"need start, cap and max_trials >= 1, got {start}, {cap}, {max_trials}")
    fit, oom, trials, stopped = None, None, [], ""

    def attempt(batch: int) -> bool:
        ok = fits(batch)
        trials.append([batch, "fits" if ok else "oom"])
        return ok

    batch = min(start, cap)
    while True:
        if len(trials) >= max_trials:
            stopped = f"stopped after {max_trials} tries"
            break
        if out_of_time():
            stopped = "stopped: no time left"
            break
        if attempt(batch):
            fit = batch
            if oom is None:
                if batch == cap:
                    break  # the cap fits: nothing larger to try
                batch = min(2 * batch, cap)
                continue
        else:
            oom = batch
            if fit is None:
                if batch == 1:
                    break  # not even one utterance fits
                batch = max(1, batch // 2)
                continue
        if oom - fit <= max(1, fit // 8):
            break
        batch = (fit + oom) // 2
    return dict(start=start, cap=cap, largest_fit=fit, smallest_oom=oom, trials=trials, stopped=stopped)


def fits_in_memory(train: Callable[[], object]) -> bool:
    """Runs `train()`; False when it ran out of memory (then the memory is released), other errors propagate."""
    try:
        train()
        return True
    except (RuntimeError, MemoryError) as error:
        if not is_oom_error(error):
            raise
    # after the except block, so that the traceback's frames (and their tensors) are gone before collecting
    gc.collect()
    garbage_collection_cuda()
    return False


def _release_memory() -> None:
    gc.collect()
    garbage_collection_cuda()


class SmokeSession:
    """The smoke's state: its results (rewritten to ``<out>/smoke.json`` after every run), its deadline and
    the data modules it prepared (one per vocabulary size: each has its own tokenizer)."""

    def __init__(self, settings: SmokeSettings, out: Path, time_limit_s: float, min_run_s: float = 20.0) -> None:
        self.settings, self.out, self.min_run_s = settings, out, min_run_s
        self.deadline = time.monotonic() + time_limit_s
        self.device = torch.device(settings.device)
        self.datamodules: dict[int, object] = {}
        self.results = dict(
            meta=dict(
                device=torch.cuda.get_device_name() if self.device.type == "cuda" else "cpu",
                torch=torch.__version__,
                experiment=settings.experiment,
                batch=settings.batch,
                steps=settings.steps,
                max_seconds=settings.max_seconds,
                memory_budget=settings.memory_budget,
                corpus=str(settings.corpus),
            ),
            runs=[],
            searches=[],
        )
        out.mkdir(parents=True, exist_ok=True)

    def save(self) -> None:
        write_text_atomic(self.out / "smoke.json", json.dumps(self.results, indent=2))

    def out_of_time(self) -> bool:
        return self.deadline - time.monotonic() < self.min_run_s

    def datamodule(self, model: ModelSpec, cfg: DictConfig):
        if model.vocab_size not in self.datamodules:
            self.datamodules[model.vocab_size] = prepared_datamodule(cfg)
        return self.datamodules[model.vocab_size]

    def module(self, cfg: DictConfig, datamodule):
        with torch.device(self.device):  # initialised on the device: 1.1 B parameters are slow to initialise on a CPU
            return build_module(cfg, datamodule, RunStart.of(cfg, None))

    def begin(self, kind: str, entry: dict) -> bool:
        """Records `entry` under `kind`; False (and the entry marked) when no run can start any more."""
        self.results[kind].append(entry)
        if self.out_of_time():
            entry["error" if kind == "runs" else "stopped"] = "no time left"
            self.save()
            return False
        return True

    def throughput(self, model: ModelSpec, mode: str) -> None:
        settings = self.settings
        run = dict(
            model=model.preset,
            vocab_size=model.vocab_size,
            mode=mode,
            batch=settings.batch,
            steps=settings.steps,
            status="skipped",
            seconds=0.0,
            utterances_per_step=None,
            utterances_per_s=None,
            audio_s_per_s=None,
            peak_mib=None,
            loss_first=None,
            loss_last=None,
            loss_finite=None,
            error="",
        )
        if not self.begin("runs", run):
            return
        cfg = compose_config(settings, model, mode, settings.batch)
        datamodule = self.datamodule(model, cfg)
        datamodule.max_duration = settings.batch * settings.max_seconds
        started = time.monotonic()
        try:
            run.update(
                train_steps(
                    cfg,
                    datamodule,
                    self.module(cfg, datamodule),
                    settings.steps,
                    settings.work_dir / "runs" / f"{model.preset}_{mode}",
                    settings.device,
                )
            )
            run["status"] = "ok"
        except (RuntimeError, MemoryError) as error:
            run["status"] = "oom" if is_oom_error(error) else "error"
            run["error"] = str(error).splitlines()[0][:200]
        _release_memory()
        run["seconds"] = time.monotonic() - started
        self.save()

    def search(self, model: ModelSpec, mode: str) -> None:
        settings = self.settings
        cfg = compose_config(settings, model, mode, settings.search_start)
        datamodule = self.datamodule(model, cfg)
        cap = len(read_manifest(datamodule.split_manifest(SPLIT)))  # no batch beyond the corpus
        search = dict(
            model=model.preset,
            vocab_size=model.vocab_size,
            mode=mode,
            start=settings.search_start,
            cap=cap,
            largest_fit=None,
            smallest_oom=None,
            trials=[],
            stopped="",
        )
        if not self.begin("searches", search):
            return
        module = self.module(cfg, datamodule)

        def fits(batch: int) -> bool:
            datamodule.max_duration = batch * settings.max_seconds
            run_dir = settings.work_dir / "runs" / f"search_{model.preset}_{mode}_{batch}"
            return fits_in_memory(lambda: train_steps(cfg, datamodule, module, PROBE_STEPS, run_dir, settings.device))

        search.update(largest_fitting(fits, settings.search_start, cap, settings.max_trials, self.out_of_time))
        module = None  # the last reference to it (the closure above): freed before _release_memory
        _release_memory()
        self.save()


def run_smoke(
    settings: SmokeSettings, models: Sequence[ModelSpec], modes: Sequence[str], out: Path, time_limit_s: float
) -> dict:
    """Throughput runs for every (model, mode), then the batch searches (see the module docstring)."""
    session = SmokeSession(settings, out, time_limit_s)
    L.seed_everything(0, workers=True)
    for model in models:
        for mode in modes:
            session.throughput(model, mode)
    if settings.search:
        for model in models:
            for mode in modes:
                session.search(model, mode)
    return session.results


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gpucheck.smoke", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help=f"LibriSpeech-layout folder holding {SPLIT}/")
    parser.add_argument("--out", type=Path, required=True, help="where smoke.json goes")
    parser.add_argument("--work-dir", type=Path, help="manifests, tokenizers, stats and run logs (default: <out>/work)")
    parser.add_argument("--experiment", default="librispeech_medium")
    parser.add_argument(
        "--models",
        default="parakeet_rnnt_1b:1025,medium:500",
        help="PRESET:VOCAB entries in priority order (VOCAB counts the blank)",
    )
    parser.add_argument("--modes", default="samplewise,batched")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--batch", type=int, default=32, help="utterances per throughput batch")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per throughput run (>= 3)")
    parser.add_argument("--max-seconds", type=float, default=40.0, help="the corpus's longest utterance")
    parser.add_argument("--memory-budget", default="2GiB", help="the sample-wise loss's budget")
    parser.add_argument("--num-workers", type=int, default=8)
    parser.add_argument("--search", action="store_true", help="also search the largest batch per model and mode")
    parser.add_argument("--search-start", type=int, default=8)
    parser.add_argument("--max-trials", type=int, default=8)
    parser.add_argument("--time-limit", type=float, default=480.0, help="seconds; later runs are skipped")
    parser.add_argument("--override", action="append", default=[], help="extra Hydra override (repeatable)")
    args = parser.parse_args(argv)
    try:
        args.models = [ModelSpec.parse(text) for text in args.models.split(",")]
    except ValueError as error:
        parser.error(str(error))
    args.modes = args.modes.split(",")
    if not args.modes or any(mode not in ("batched", "samplewise") for mode in args.modes):
        parser.error(f"--modes: a comma-separated subset of batched,samplewise, got {','.join(args.modes)}")
    if args.steps < 3:
        parser.error(f"--steps must be >= 3 (the rates leave out the first step), got {args.steps}")
    if not (args.corpus / SPLIT).is_dir():
        parser.error(
            f"--corpus {args.corpus}: no {SPLIT}/ inside (make one with scripts/make_synthetic_librispeech.py)"
        )
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device visible (use --device cpu for a dry run)")
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    settings = SmokeSettings(
        corpus=args.corpus.resolve(),
        work_dir=(args.work_dir or args.out / "work").resolve(),
        experiment=args.experiment,
        device=args.device,
        batch=args.batch,
        steps=args.steps,
        max_seconds=args.max_seconds,
        memory_budget=args.memory_budget,
        num_workers=args.num_workers,
        search=args.search,
        search_start=args.search_start,
        max_trials=args.max_trials,
        overrides=tuple(args.override),
    )
    results = run_smoke(settings, args.models, args.modes, args.out, args.time_limit)
    print(render_results(results))
    return results


if __name__ == "__main__":
    main()
