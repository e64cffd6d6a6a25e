"""Stage "build": compile and load the loss's kernels for a device by computing one tiny loss there.

The libraries are built on first use (``asr_plugin.losses``); a tiny forward and backward triggers the CPU
library's build and, for ``--device cuda``, the CUDA library's, and proves both load and run.

    python -m asr_plugin.gpucheck.build --device cuda
"""

from __future__ import annotations

import argparse
import time

import torch

from asr_plugin.losses import transducer_loss


def build_for(device: torch.device) -> float:
    """Seconds to build (or load) the kernels for `device` and run a (2, 4, 3, 5) lattice's loss and gradient."""
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, 3, 5, generator=generator).to(device).requires_grad_()  # (B, T, U+1, V)
    targets = torch.tensor([[1, 2], [3, 4]], device=device)
    lengths, target_lengths = torch.tensor([4, 3], device=device), torch.tensor([2, 1], device=device)
    loss = transducer_loss(logits, targets, lengths, target_lengths)
    loss.backward()
    if not (torch.isfinite(loss) and torch.isfinite(logits.grad).all()):
        raise RuntimeError(f"the tiny loss on {device} is not finite: {loss.item()}")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m asr_plugin.gpucheck.build", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device visible")
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if args.device == "cuda" else [])
    for device in devices:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        print(f"{device.type} kernels ({name}, torch {torch.__version__}): built or loaded and ran in {build_for(device):.1f} s")


if __name__ == "__main__":
    main()
