"""Memory and time of one fine-tuning step of a NeMo (Fast)Conformer-RNNT on long utterances, per loss mode.

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

    OMP_NUM_THREADS=2 python scripts/benchmark_nemo_finetune.py --preset small --batch 2 --seconds 20
    python scripts/benchmark_nemo_finetune.py --nemo stt_en_conformer_transducer_large.nemo --device cuda --batch 8 --seconds 35
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmark_loss import _rss_kib  # noqa: E402  (scripts/ is this script's own directory)
from hydra.utils import instantiate  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from asr_plugin.finetune import import_nemo  # noqa: E402
from asr_plugin.losses import TransducerLoss  # noqa: E402
from asr_plugin.models import NemoMelFrontend  # noqa: E402

MODES = ("batched", "samplewise")


def build(args: dict, device: torch.device):
    """(model, frontend) in training mode: imported from --nemo, or the preset with random weights (seed 0)."""
    torch.manual_seed(0)
    if args["nemo"]:
        imported = import_nemo(args["nemo"])
        model, frontend = imported.model, imported.frontend
    else:
        config = OmegaConf.load(ROOT / "conf" / "model" / f"{args['preset']}.yaml")
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
    loss_fn = TransducerLoss(mode=mode, memory_budget=args["memory_budget"])
    step(model, frontend, loss_fn, batch)  # warm-up (extension load, allocator)
    if device.type == "cuda":
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        baseline = _rss_kib("VmRSS") * 1024
    start = time.perf_counter()
    loss = step(model, frontend, loss_fn, batch)
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - baseline
    else:
        peak = _rss_kib("VmHWM") * 1024 - baseline
    frames = int(model.encoder.output_lengths(frontend.num_frames(batch[1]))[0])
    return dict(mode=mode, loss=loss, time_s=time.perf_counter() - start, peak_mib=peak / 2**20,
                frames=frames, tokens=int(batch[3][0]), vocab=model.vocab_size,
                parameters_m=sum(p.numel() for p in model.parameters()) / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nemo", help="a .nemo file (default: --preset with random weights)")
    parser.add_argument("--preset", choices=("small", "medium", "large"), default="small")
    parser.add_argument("--vocab", type=int, default=1025, help="preset only: output size with the blank")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--tokens-per-second", type=float, default=4.0)
    parser.add_argument("--memory-budget", default=None, help="sample-wise budget, e.g. 256MiB")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--cell", help=argparse.SUPPRESS)  # internal: one measurement in a subprocess
    args = parser.parse_args()
    if args.cell:
        request = json.loads(args.cell)
        print(json.dumps(measure_in_process(request["args"], request["mode"])))
        return
    rows = []
    for mode in args.modes.split(","):
        request = json.dumps(dict(args=vars(args), mode=mode))
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
        process = subprocess.run([sys.executable, __file__, "--cell", request], capture_output=True, text=True, env=env)
        if process.returncode != 0:
            rows.append(dict(mode=mode, error=(process.stderr.strip().splitlines() or [f"exit {process.returncode}"])[-1]))
        else:
            rows.append(json.loads(process.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    source = args.nemo or f"preset {args.preset}"
    print(f"\n{source}, {args.device}, B={args.batch}, {args.seconds:g} s/utterance, threads={torch.get_num_threads()}")
    print(f"{'mode':<11} {'params (M)':>10} {'T enc':>6} {'U':>4} {'V':>5} {'loss':>9} {'peak MiB':>9} {'time s':>7}")
    for row in rows:
        if "error" in row:
            print(f"{row['mode']:<11} error: {row['error']}")
            continue
        print(f"{row['mode']:<11} {row['parameters_m']:>10.1f} {row['frames']:>6} {row['tokens']:>4} {row['vocab']:>5} "
              f"{row['loss']:>9.2f} {row['peak_mib']:>9.0f} {row['time_s']:>7.1f}")


if __name__ == "__main__":
    main()
