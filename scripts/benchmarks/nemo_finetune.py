"""Memory and time of one fine-tuning step of a NeMo (Fast)Conformer-RNNT on long utterances, per loss mode: the
measurements behind scripts/benchmark_nemo_finetune.py.

One step = NeMo front end -> encoder -> predictor -> loss (batched or sample-wise) -> backward, in training
mode, on synthetic audio of --seconds per utterance with --tokens-per-second targets (dropout on, so the
two modes' losses differ by their dropout draws). The model is an
imported ``.nemo`` (--nemo) or, without one, a preset of the same architecture with random weights
(--preset small|medium|large, the NeMo Conformer-Transducer sizes; V = --vocab). Weights do not change
memory or time, so a preset stands in for a downloaded checkpoint of that size.

CPU: each mode runs in a fresh interpreter; memory is the peak RSS above the RSS after the model and inputs
were built and one warm-up step ran (as scripts/benchmark_loss.py measures it), with glibc's malloc told to
map every block over 64 KiB on its own (MALLOC_MMAP_THRESHOLD_), so freed tensors leave the RSS and the
peak is that of live memory, not of what the allocator kept from the warm-up. CUDA: peak allocated memory.

`measure` runs one (settings, mode) cell in a fresh interpreter (``python -m benchmarks.nemo_finetune
<request>``, which prints the cell's JSON).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from asr_plugin.formats.nemo import import_nemo
from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.losses import TransducerLoss
from benchmarks import child_environment
from benchmarks.loss import rss_kib

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

MODES = ("batched", "samplewise")


def build(args: dict, device: torch.device):
    """(model, frontend) in training mode: imported from --nemo, or the preset with random weights (seed 0)."""
    torch.manual_seed(0)
    if args["nemo"]:
        imported = import_nemo(args["nemo"])
        model, frontend = imported.model, imported.frontend
    else:
        config = OmegaConf.load(CONF_DIR / "model" / f"{args['preset']}.yaml")
        config.vocab_size = args["vocab"]
        model, frontend = instantiate(config), NemoMelFrontend()
    return model.to(device).train(), frontend.to(device).train()


def make_batch(args: dict, vocab_size: int, device: torch.device):
    """(B, S) audio at 16 kHz, (B,) lengths, (B, U) targets in [1, V), (B,) target lengths; all utterances full length."""
    generator = torch.Generator().manual_seed(0)
    samples, tokens = int(args["seconds"] * 16000), int(args["seconds"] * args["tokens_per_second"])
    audio = 0.1 * torch.randn(args["batch"], samples, generator=generator)
    targets = torch.randint(1, vocab_size, (args["batch"], tokens), generator=generator)
    lengths = torch.full((args["batch"],), samples)
    target_lengths = torch.full((args["batch"],), tokens)
    return [t.to(device) for t in (audio, lengths, targets, target_lengths)]


def step(model, frontend, loss_fn, batch) -> float:
    audio, lengths, targets, target_lengths = batch
    features, feature_lengths = frontend(audio, lengths)
    loss = model(features, feature_lengths, targets, target_lengths, loss_fn)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return float(loss.detach())


def measure_in_process(args: dict, mode: str) -> dict:
    device = torch.device(args["device"])
    model, frontend = build(args, device)
    batch = make_batch(args, model.vocab_size, device)
    loss_fn = TransducerLoss(mode=mode, lattice=model.lattice, memory_budget=args["memory_budget"])
    step(model, frontend, loss_fn, batch)  # warm-up (extension load, allocator)
    if device.type == "cuda":
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        baseline = rss_kib("VmRSS") * 1024
    start = time.perf_counter()
    loss = step(model, frontend, loss_fn, batch)
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - baseline
    else:
        peak = rss_kib("VmHWM") * 1024 - baseline
    frames = int(model.encoder.output_lengths(frontend.num_frames(batch[1]))[0])
    return dict(
        mode=mode,
        loss=loss,
        time_s=time.perf_counter() - start,
        peak_mib=peak / 2**20,
        frames=frames,
        tokens=int(batch[3][0]),
        vocab=model.vocab_size,
        parameters_m=sum(p.numel() for p in model.parameters()) / 1e6,
    )


def measure(args: dict, mode: str) -> dict:
    """One cell in a fresh interpreter (so peaks of earlier cells do not count): its results, or {"error": ...}."""
    request = json.dumps(dict(args=args, mode=mode))
    env = child_environment(MALLOC_MMAP_THRESHOLD_="65536")
    process = subprocess.run([sys.executable, "-m", __name__, request], capture_output=True, text=True, env=env)
    if process.returncode != 0:
        return dict(mode=mode, error=(process.stderr.strip().splitlines() or [f"exit {process.returncode}"])[-1])
    return json.loads(process.stdout.strip().splitlines()[-1])


def table(rows: list[dict], args: dict) -> str:
    """The rows as the text table the script prints."""
    source = args["nemo"] or f"preset {args['preset']}"
    lines = [
        f"{source}, {args['device']}, B={args['batch']}, {args['seconds']:g} s/utterance, "
        f"threads={torch.get_num_threads()}",
        f"{'mode':<11} {'params (M)':>10} {'T enc':>6} {'U':>4} {'V':>5} {'loss':>9} {'peak MiB':>9} {'time s':>7}",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['mode']:<11} error: {row['error']}")
            continue
        lines.append(
            f"{row['mode']:<11} {row['parameters_m']:>10.1f} {row['frames']:>6} {row['tokens']:>4} "
            f"{row['vocab']:>5} {row['loss']:>9.2f} {row['peak_mib']:>9.0f} {row['time_s']:>7.1f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # one cell: python -m benchmarks.nemo_finetune '<request JSON>'
    cell = json.loads(sys.argv[1])
    print(json.dumps(measure_in_process(cell["args"], cell["mode"])))
